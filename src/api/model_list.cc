#include "api/model_list.h"

namespace pagoda::api {

namespace {

Json model_entry(const ServedModel& model, const std::string& name) {
  return {{"id", name},
          {"object", "model"},
          {"created", model.created},
          {"owned_by", "pagoda"},
          {"root", model.root},
          {"parent", nullptr},
          {"max_model_len", model.max_model_len},
          {"permission", Json::array()}};
}

}  // namespace

Json models_response(const ServedModel& model) {
  Json data = Json::array();
  for (const std::string& name : model.names) data.push_back(model_entry(model, name));
  return {{"object", "list"}, {"data", std::move(data)}};
}

ApiErrorOr<Json> model_response(const ServedModel& model, std::string_view name) {
  if (!model.serves(name)) return ApiError::model_not_found(name);
  return model_entry(model, std::string(name));
}

std::string_view pagoda_version() {
  return PAGODA_VERSION;
}

Json version_response() {
  return {{"version", pagoda_version()}};
}

}  // namespace pagoda::api

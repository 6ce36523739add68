// libFuzzer target for the chat-template interpreter: any input must compile or fail with a
// Status, and any compiled template must render (or fail with a Status) within the sandbox
// limits, never crash or hang. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  auto compiled = pagoda::ChatTemplate::compile(std::move(source));
  if (!compiled.ok()) return 0;
  pagoda::ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"u"},)"
      R"({"role":"assistant","content":"a","tool_calls":[{"function":{"name":"f","arguments":{}}}]}])");
  inputs.add_generation_prompt = true;
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  (void)compiled->render(inputs);
  return 0;
}

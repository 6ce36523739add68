// `pagoda`: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Pagoda: an LLM inference server for GGUF and Hugging Face models", "pagoda"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pagoda 0.1.0");

  pagoda::cli::InspectCommand inspect;
  pagoda::cli::TokenizeCommand tokenize;
  pagoda::cli::ChatTemplateCommand chat_template;
  pagoda::cli::GenerateCommand generate;
  pagoda::cli::BenchCommand bench;
  pagoda::cli::ServeCommand serve;
  pagoda::cli::PerplexityCommand perplexity;
  CLI::App* inspect_app = inspect.add_to(app);
  CLI::App* tokenize_app = tokenize.add_to(app);
  CLI::App* chat_template_app = chat_template.add_to(app);
  CLI::App* generate_app = generate.add_to(app);
  CLI::App* bench_app = bench.add_to(app);
  CLI::App* serve_app = serve.add_to(app);
  CLI::App* perplexity_app = perplexity.add_to(app);

  CLI11_PARSE(app, argc, argv);

  if (inspect_app->parsed()) return inspect.run(argv[0]);
  if (tokenize_app->parsed()) return tokenize.run(argv[0]);
  if (chat_template_app->parsed()) return chat_template.run(argv[0]);
  if (generate_app->parsed()) return generate.run(argv[0]);
  if (bench_app->parsed()) return bench.run(argv[0]);
  if (serve_app->parsed()) return serve.run(argv[0]);
  if (perplexity_app->parsed()) return perplexity.run(argv[0]);
  std::fputs(app.help().c_str(), stderr);
  return 2;
}

#include "structured/constraint_compiler.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "structured/schema_rewrite.h"
#include "structured/xgrammar_handles.h"

namespace pagoda::structured {

namespace {

using Clock = std::chrono::steady_clock;
using Result = CompileResult;

// An EBNF string literal for `text`: quotes, backslashes and control bytes escaped.
std::string ebnf_literal(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The first line of an xgrammar error, without its "[time] file.cc:line: " prefix.
std::string grammar_error(const ConstraintSpec& spec, const std::exception& e) {
  std::string message = e.what();
  if (const std::size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
  if (const std::size_t at = message.find(".cc:"); at != std::string::npos) {
    if (const std::size_t colon = message.find(": ", at); colon != std::string::npos) {
      message.erase(0, colon + 2);
    }
  }
  if (message.size() > 400) message = message.substr(0, 400) + "...";
  return "invalid " + std::string(constraint_kind_name(spec.kind)) + ": " + message;
}

Status busy() {
  return Status(StatusCode::kUnavailable,
                "too many structured-output constraints are compiling; retry shortly");
}

}  // namespace

const char* compile_outcome_name(CompileOutcome outcome) {
  switch (outcome) {
    case CompileOutcome::kOk: return "ok";
    case CompileOutcome::kInvalid: return "invalid";
    case CompileOutcome::kTimeout: return "timeout";
    case CompileOutcome::kQueueFull: return "queue_full";
    case CompileOutcome::kCancelled: return "cancelled";
    case CompileOutcome::kShutdown: return "shutdown";
  }
  return "unknown";
}

struct ConstraintCompiler::State {
  // One caller's wait; `done` is emptied once it has been handed its result or cancelled.
  struct Waiter {
    CompileCallback done;
    Clock::time_point deadline;
  };
  // One spec's compile, queued or running, and the callers waiting for it.
  struct Job {
    ConstraintSpec spec;
    std::string key;
    bool started = false;  // handed to a worker (its time counts as compile time)
    std::vector<std::shared_ptr<Waiter>> waiters;
  };
  struct Entry {
    Result result;
    std::size_t bytes = 0;
    std::list<std::string>::iterator lru;
  };
  // A callback to call once the lock is let go.
  using Delivery = std::pair<CompileCallback, Result>;

  State(const Tokenizer& tokenizer, std::int64_t vocab_size, std::vector<std::int32_t> stop_ids,
        ConstraintLimits l)
      : limits(l),
        vocabulary(std::make_shared<TokenVocabulary>(tokenizer, vocab_size, std::move(stop_ids))),
        // xgrammar's own cache keeps the token masks of rules it has compiled before (strings,
        // numbers, formats...), so a new schema made of familiar parts compiles in a fraction of
        // the time; it shares cache_bytes with the compiled grammars (a third for the rules).
        compiler(vocabulary->impl().info, std::max(1, l.compile_threads),
                 /*cache_enabled=*/true, static_cast<std::int64_t>(l.cache_bytes)) {}

  // Runs on a worker: the grammar engine has no way to stop a compile midway.
  Result run(const ConstraintSpec& spec) {
    try {
      xgrammar::CompiledGrammar grammar = [&] {
        switch (spec.kind) {
          case ConstraintKind::kJsonObject:
            return compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false);
          case ConstraintKind::kJsonSchema:
            // Compact separators (", " and ": "), no free whitespace: a small model cannot loop
            // on blank lines, and every output is still valid JSON for the schema.
            return compiler.CompileJSONSchema(rewrite_schema(spec.text),
                                              /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                              /*strict_mode=*/true);
          case ConstraintKind::kRegex: return compiler.CompileRegex(spec.text);
          case ConstraintKind::kChoice: {
            std::string ebnf = "root ::= ";
            for (std::size_t i = 0; i < spec.choices.size(); ++i) {
              ebnf += (i > 0 ? " | " : "") + ebnf_literal(spec.choices[i]);
            }
            return compiler.CompileGrammar(ebnf, "root");
          }
          case ConstraintKind::kGrammar: return compiler.CompileGrammar(spec.text, "root");
        }
        throw std::logic_error("unknown constraint kind");
      }();
      auto compiled = std::make_shared<const CompiledConstraint>(
          spec.kind, std::make_unique<CompiledConstraint::Impl>(
                         CompiledConstraint::Impl{std::move(grammar), vocabulary}));
      if (compiled->memory_bytes() > limits.max_compiled_bytes) {
        return invalid_argument("the " + std::string(constraint_kind_name(spec.kind)) +
                                " compiles to " + std::to_string(compiled->memory_bytes()) +
                                " bytes; at most " + std::to_string(limits.max_compiled_bytes) +
                                " are supported");
      }
      return std::shared_ptr<const CompiledConstraint>(std::move(compiled));
    } catch (const std::exception& e) {
      return invalid_argument(grammar_error(spec, e));
    }
  }

  // Caches `result` under `key` and evicts the least recently used beyond cache_bytes. Errors
  // are cached too (a hostile spec sent again costs a lookup), counted at a nominal size.
  void store(const std::string& key, const Result& result) {
    const std::size_t bytes = key.size() + (result.ok() ? (*result)->memory_bytes() : 256);
    if (bytes > limits.cache_bytes) return;
    if (const auto old = cache.find(key); old != cache.end()) {
      cache_bytes -= old->second.bytes;
      lru.erase(old->second.lru);
      cache.erase(old);
    }
    lru.push_front(key);
    cache_bytes += bytes;
    cache.emplace(key, Entry{result, bytes, lru.begin()});
    while (cache_bytes > limits.cache_bytes && !lru.empty()) {
      const auto it = cache.find(lru.back());
      cache_bytes -= it->second.bytes;
      cache.erase(it);
      lru.pop_back();
    }
  }

  // Counts one caller's wait as finished. Called with the lock held.
  void finish_wait(CompileOutcome outcome) {
    ++stats.waits_finished[static_cast<std::size_t>(outcome)];
  }

  // Counts one finished compile's time. Called with the lock held.
  void observe_compile(double seconds) {
    const auto bucket =
        std::lower_bound(kCompileTimeBuckets.begin(), kCompileTimeBuckets.end(), seconds) -
        kCompileTimeBuckets.begin();
    ++stats.compile_time_buckets[static_cast<std::size_t>(bucket)];
    stats.compile_seconds += seconds;
    ++stats.compiles_finished;
  }

  // What a waiter past its deadline hears: the compile took too long, or never found a worker.
  // Called with the lock held; counts the wait as finished.
  Result too_late(const Job& job) {
    if (!job.started) {
      finish_wait(CompileOutcome::kQueueFull);
      return busy();
    }
    finish_wait(CompileOutcome::kTimeout);
    return invalid_argument("the " + std::string(constraint_kind_name(job.spec.kind)) +
                            " took longer than " +
                            std::to_string(static_cast<int>(limits.compile_timeout_seconds)) +
                            " s to compile; simplify it");
  }

  // Hands queued jobs to free workers. Called with the lock held.
  void start_jobs() {
    while (running < limits.max_running_compiles && !queue.empty()) {
      std::shared_ptr<Job> job = std::move(queue.front());
      queue.pop_front();
      job->started = true;
      ++running;
      ++stats.compiles;
      ready.push_back(std::move(job));
      changed.notify_all();
    }
  }

  // Drops a queued job nobody waits for. Called with the lock held.
  void forget_if_unwanted(const std::shared_ptr<Job>& job) {
    if (job->started || !job->waiters.empty()) return;
    queue.erase(std::remove(queue.begin(), queue.end(), job), queue.end());
    jobs.erase(job->key);
    ++stats.compiles_dropped;
  }

  // A worker: runs jobs until the compiler goes.
  void work() {
    std::unique_lock lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stopping || !ready.empty(); });
      if (stopping) return;
      std::shared_ptr<Job> job = std::move(ready.front());
      ready.pop_front();
      lock.unlock();
      const Clock::time_point start = Clock::now();
      Result result = run(job->spec);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      lock.lock();
      observe_compile(seconds);
      if (stopping) return;
      store(job->key, result);
      jobs.erase(job->key);
      std::vector<Delivery> deliveries;
      const Clock::time_point now = Clock::now();
      for (const std::shared_ptr<Waiter>& waiter : job->waiters) {
        if (!waiter->done) continue;
        // One the deadline thread has not reached yet still hears that it was too late.
        if (waiter->deadline < now) {
          deliveries.emplace_back(std::exchange(waiter->done, {}), too_late(*job));
          continue;
        }
        finish_wait(result.ok() ? CompileOutcome::kOk : CompileOutcome::kInvalid);
        deliveries.emplace_back(std::exchange(waiter->done, {}), result);
      }
      job->waiters.clear();
      lock.unlock();
      for (Delivery& d : deliveries) d.first(std::move(d.second));
      // The worker counts as busy until its callbacks have returned.
      lock.lock();
      --running;
      start_jobs();
    }
  }

  // The deadline thread: answers every waiter whose time has passed.
  void watch_deadlines() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      const Clock::time_point now = Clock::now();
      Clock::time_point next = Clock::time_point::max();
      std::vector<Delivery> deliveries;
      std::vector<std::shared_ptr<Job>> emptied;
      for (const auto& [key, job] : jobs) {
        auto& waiters = job->waiters;
        for (auto it = waiters.begin(); it != waiters.end();) {
          if ((*it)->deadline > now) {
            next = std::min(next, (*it)->deadline);
            ++it;
            continue;
          }
          deliveries.emplace_back(std::exchange((*it)->done, {}), too_late(*job));
          it = waiters.erase(it);
        }
        if (waiters.empty()) emptied.push_back(job);
      }
      for (const std::shared_ptr<Job>& job : emptied) forget_if_unwanted(job);
      if (!deliveries.empty()) {
        lock.unlock();
        for (Delivery& d : deliveries) d.first(std::move(d.second));
        lock.lock();
        continue;
      }
      if (next == Clock::time_point::max()) {
        changed.wait(lock);
      } else {
        changed.wait_until(lock, next);
      }
    }
  }

  const ConstraintLimits limits;
  const std::shared_ptr<const TokenVocabulary> vocabulary;
  xgrammar::GrammarCompiler compiler;

  std::mutex mutex;  // guards everything below
  std::condition_variable changed;
  std::unordered_map<std::string, Entry> cache;
  std::list<std::string> lru;  // most recent first
  std::size_t cache_bytes = 0;
  std::unordered_map<std::string, std::shared_ptr<Job>> jobs;  // queued or running, by key
  std::deque<std::shared_ptr<Job>> queue;                      // waiting for a worker
  std::deque<std::shared_ptr<Job>> ready;                      // started, not yet picked up
  int running = 0;
  bool stopping = false;
  CompilerStats stats;
};

ConstraintCompiler::ConstraintCompiler(const Tokenizer& tokenizer, std::int64_t vocab_size,
                                       std::vector<std::int32_t> stop_token_ids,
                                       ConstraintLimits limits)
    : state_(std::make_shared<State>(tokenizer, vocab_size, std::move(stop_token_ids), limits)) {
  // The threads share the state and end on their own once the compiler goes: a worker in the
  // middle of a compile finishes it first, which nobody should have to wait for.
  for (int i = 0; i < std::max(1, limits.max_running_compiles); ++i) {
    std::thread([state = state_] { state->work(); }).detach();
  }
  std::thread([state = state_] { state->watch_deadlines(); }).detach();
}

ConstraintCompiler::~ConstraintCompiler() {
  State& s = *state_;
  std::vector<CompileCallback> waiting;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    for (const auto& [key, job] : s.jobs) {
      for (const auto& waiter : job->waiters) {
        if (!waiter->done) continue;
        s.finish_wait(CompileOutcome::kShutdown);
        waiting.push_back(std::exchange(waiter->done, {}));
      }
    }
    s.jobs.clear();
    s.queue.clear();
    s.ready.clear();
    s.changed.notify_all();
  }
  for (CompileCallback& done : waiting) {
    done(Status(StatusCode::kUnavailable, "the server is shutting down"));
  }
}

const ConstraintLimits& ConstraintCompiler::limits() const {
  return state_->limits;
}

const TokenVocabulary& ConstraintCompiler::vocabulary() const {
  return *state_->vocabulary;
}

CompilerStats ConstraintCompiler::stats() const {
  std::lock_guard lock(state_->mutex);
  CompilerStats s = state_->stats;
  s.queued = static_cast<std::int64_t>(state_->queue.size());
  s.running = state_->running;
  s.cache_bytes = state_->cache_bytes;
  s.cached = static_cast<std::int64_t>(state_->cache.size());
  return s;
}

CompileTicket ConstraintCompiler::compile_async(const ConstraintSpec& spec, CompileCallback done) {
  State& s = *state_;
  std::string key = spec.cache_key();
  std::unique_lock lock(s.mutex);
  ++s.stats.cache_queries;
  const auto answer_now = [&](Result result) {
    lock.unlock();
    done(std::move(result));
    return CompileTicket();
  };
  if (const auto it = s.cache.find(key); it != s.cache.end()) {
    s.lru.splice(s.lru.begin(), s.lru, it->second.lru);
    ++s.stats.cache_hits;
    return answer_now(it->second.result);
  }
  ++s.stats.waits_started;
  std::shared_ptr<State::Job> job;
  if (const auto it = s.jobs.find(key); it != s.jobs.end()) {
    job = it->second;
  } else {
    if (Status limit = check_constraint_limits(spec, s.limits); !limit.ok()) {
      s.finish_wait(CompileOutcome::kInvalid);
      s.store(key, limit);
      return answer_now(std::move(limit));
    }
    if (s.stopping) {
      s.finish_wait(CompileOutcome::kShutdown);
      return answer_now(Status(StatusCode::kUnavailable, "the server is shutting down"));
    }
    if (s.running >= s.limits.max_running_compiles &&
        static_cast<int>(s.queue.size()) >= s.limits.max_queued_compiles) {
      s.finish_wait(CompileOutcome::kQueueFull);
      return answer_now(busy());
    }
    job = std::make_shared<State::Job>(State::Job{.spec = spec, .key = key});
    s.jobs.emplace(std::move(key), job);
    s.queue.push_back(job);
    s.start_jobs();
  }
  auto waiter = std::make_shared<State::Waiter>(State::Waiter{
      .done = std::move(done),
      .deadline =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(s.limits.compile_timeout_seconds))});
  job->waiters.push_back(waiter);
  s.changed.notify_all();  // the deadline thread learns of the new deadline
  return CompileTicket([weak_state = std::weak_ptr<State>(state_),
                        weak_job = std::weak_ptr<State::Job>(job),
                        weak_waiter = std::weak_ptr<State::Waiter>(waiter)] {
    const std::shared_ptr<State> state = weak_state.lock();
    const std::shared_ptr<State::Job> job = weak_job.lock();
    if (!state || !job) return;
    std::lock_guard lock(state->mutex);
    const std::shared_ptr<State::Waiter> waiter = weak_waiter.lock();
    if (!waiter || !waiter->done) return;
    waiter->done = nullptr;
    state->finish_wait(CompileOutcome::kCancelled);
    std::erase(job->waiters, waiter);
    state->forget_if_unwanted(job);
  });
}

CompileResult ConstraintCompiler::compile(const ConstraintSpec& spec) {
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> future = promise->get_future();
  CompileTicket ticket =
      compile_async(spec, [promise](Result result) { promise->set_value(std::move(result)); });
  return future.get();
}

}  // namespace pagoda::structured

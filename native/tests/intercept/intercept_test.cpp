// The interposer against the fake driver and runtime: fake_program runs under LD_PRELOAD and says
// which records it expects (its own addresses, in order); the log must hold exactly those, with
// the right threads, flags and failure status, none twice (a runtime call's own driver call), none
// from a forked child; a second process under the same preload leaves the log alone; stacks come
// as frame records when asked for; and a program killed with SIGKILL leaves whole records up to
// the last flush. Runs without a GPU.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../intercept/intercept_log.h"
#include "check.hpp"

extern char** environ;

namespace {

struct run_result {
  int exit_code = -1;
  int signal = 0;
  std::string output;
};

std::string scratch_dir() {
  static std::string dir = [] {
    char pattern[] = "/tmp/vramscope-intercept-XXXXXX";
    const char* made = mkdtemp(pattern);
    if (made == nullptr) std::abort();
    return std::string(made);
  }();
  return dir;
}

// Runs fake_program with `env` added; stdout to a file; optionally killed after `kill_after_ms`.
run_result run_program(const std::vector<std::string>& args, const std::vector<std::string>& env,
                       int kill_after_ms = -1) {
  static int serial = 0;
  const std::string out = scratch_dir() + "/stdout." + std::to_string(++serial);
  std::vector<std::string> full_env;
  for (char** e = environ; *e; ++e) {
    std::string v = *e;
    if (v.rfind("LD_PRELOAD=", 0) == 0 || v.rfind("VRAMSCOPE_INTERCEPT_", 0) == 0) continue;
    full_env.push_back(v);
  }
  for (const std::string& v : env) full_env.push_back(v);
  std::vector<char*> argv{const_cast<char*>(FAKE_PROGRAM)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& v : full_env) envp.push_back(v.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  run_result r;
  if (posix_spawn(&pid, FAKE_PROGRAM, &actions, nullptr, argv.data(), envp.data()) != 0) return r;
  posix_spawn_file_actions_destroy(&actions);
  if (kill_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
    kill(pid, SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  std::ifstream in(out);
  std::stringstream s;
  s << in.rdbuf();
  r.output = s.str();
  return r;
}

struct log_file {
  bool ok = false;
  vramscope_intercept_header header{};
  std::vector<vramscope_intercept_record> records;
  std::size_t trailing_bytes = 0;  // a record cut short
};

log_file read_log(const std::string& path) {
  log_file f;
  std::ifstream in(path, std::ios::binary);
  if (!in) return f;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof f.header) return f;
  std::memcpy(&f.header, bytes.data(), sizeof f.header);
  const std::size_t body = bytes.size() - sizeof f.header;
  f.records.resize(body / sizeof(vramscope_intercept_record));
  if (!f.records.empty())
    std::memcpy(f.records.data(), bytes.data() + sizeof f.header,
                f.records.size() * sizeof(vramscope_intercept_record));
  f.trailing_bytes = body % sizeof(vramscope_intercept_record);
  f.ok = std::memcmp(f.header.magic, VRAMSCOPE_INTERCEPT_MAGIC, 8) == 0;
  return f;
}

struct expectation {
  int op;
  unsigned long long address, size, stream;
  int status, flags;
  std::string thread;
};

std::vector<expectation> expectations(const std::string& output, int* nested) {
  std::vector<expectation> list;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string what;
    words >> what;
    if (what == "expect") {
      expectation e;
      std::string address, stream;
      words >> e.op >> address >> e.size >> stream >> e.status >> e.flags >> e.thread;
      e.address = std::stoull(address, nullptr, 16);
      e.stream = std::stoull(stream, nullptr, 16);
      list.push_back(e);
    } else if (what == "nested") {
      words >> *nested;
    }
  }
  return list;
}

std::string preload() { return std::string("LD_PRELOAD=") + INTERCEPT_LIBRARY; }
std::string log_env(const std::string& path) {
  return std::string(VRAMSCOPE_INTERCEPT_ENV_LOG) + "=" + path;
}

TEST(
    "every way a program reaches the memory functions is recorded once, in order, with thread and "
    "status") {
  const std::string path = scratch_dir() + "/script.log";
  run_result r = run_program({"script"}, {preload(), log_env(path)});
  REQUIRE(r.exit_code == 0);
  int nested = -1;
  std::vector<expectation> want = expectations(r.output, &nested);
  REQUIRE(want.size() == 25);
  log_file f = read_log(path);
  REQUIRE(f.ok);
  CHECK_EQ(f.header.version, VRAMSCOPE_INTERCEPT_VERSION);
  CHECK_EQ(f.header.record_size, 64u);
  CHECK_EQ(f.trailing_bytes, 0u);
  std::vector<vramscope_intercept_record> calls;
  const vramscope_intercept_record* note = nullptr;
  for (const auto& rec : f.records) {
    if (rec.op == VRAMSCOPE_OP_NOTE) note = &rec;
    else calls.push_back(rec);
  }
  REQUIRE(calls.size() == want.size());
  std::map<std::string, std::uint32_t> thread_of;
  std::uint64_t previous_time = f.header.start_monotonic_ns;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& got = calls[i];
    const auto& e = want[i];
    const std::string at = "record " + std::to_string(i) + " (op " + std::to_string(e.op) + ")";
    if (got.op != e.op || got.address != e.address || got.size != e.size ||
        got.stream != e.stream || got.status != e.status || got.flags != e.flags) {
      ::check::report(__FILE__, __LINE__,
                      at + ": got op " + std::to_string(got.op) + " address " +
                          std::to_string(got.address) + " size " + std::to_string(got.size) +
                          " stream " + std::to_string(got.stream) + " status " +
                          std::to_string(got.status) + " flags " + std::to_string(got.flags));
    }
    CHECK(got.time_ns >= previous_time);
    previous_time = got.time_ns;
    CHECK(got.sequence < f.records.size());
    auto [it, added] = thread_of.emplace(e.thread, got.thread);
    if (!added && it->second != got.thread)
      ::check::report(__FILE__, __LINE__, at + ": thread id changed");
  }
  REQUIRE(thread_of.size() == 2);
  CHECK(thread_of["main"] != thread_of["other"]);
  CHECK_EQ(thread_of["main"],
           static_cast<std::uint32_t>(f.header.pid));  // the main thread's tid is the pid
  // The runtime's own driver calls were counted, not recorded.
  REQUIRE(note != nullptr);
  CHECK_EQ(note->size, static_cast<std::uint64_t>(nested));
  CHECK_EQ(note->aux, 0u);  // every cuGetProcAddress answer was wrapped
}

TEST("without VRAMSCOPE_INTERCEPT_LOG the library only passes calls through") {
  run_result r = run_program({"script"}, {preload()});
  CHECK_EQ(r.exit_code, 0);
  int nested = -1;
  CHECK_EQ(expectations(r.output, &nested).size(), 25u);
}

TEST("a second process under the same preload leaves an existing log alone") {
  const std::string path = scratch_dir() + "/claimed.log";
  { std::ofstream(path) << "someone else's"; }
  run_result r = run_program({"script"}, {preload(), log_env(path)});
  CHECK_EQ(r.exit_code, 0);
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_EQ(content, std::string("someone else's"));
}

TEST("with VRAMSCOPE_INTERCEPT_STACK each call is followed by its frames") {
  const std::string path = scratch_dir() + "/stacks.log";
  run_result r = run_program(
      {"script"}, {preload(), log_env(path), std::string(VRAMSCOPE_INTERCEPT_ENV_STACK) + "=4"});
  REQUIRE(r.exit_code == 0);
  log_file f = read_log(path);
  REQUIRE(f.ok);
  CHECK_EQ(f.header.stack_depth, 4u);
  std::map<std::uint64_t, int> frames_of;
  std::size_t calls = 0;
  for (const auto& rec : f.records) {
    if (rec.op == VRAMSCOPE_OP_FRAME) {
      ++frames_of[rec.aux];
      CHECK(rec.address != 0);
    } else if (rec.op != VRAMSCOPE_OP_NOTE) {
      ++calls;
    }
  }
  CHECK_EQ(calls, 25u);
  CHECK_EQ(frames_of.size(), calls);
  for (auto& [owner, n] : frames_of) CHECK(n >= 1 && n <= 4);
}

TEST("a program killed with SIGKILL leaves whole records up to the last flush") {
  const std::string path = scratch_dir() + "/killed.log";
  run_result r = run_program({"loop", "100"}, {preload(), log_env(path)}, 600);
  CHECK_EQ(r.signal, SIGKILL);
  // "ops N" lines: the program had made at least that many calls before the kill.
  unsigned long reported = 0;
  std::istringstream lines(r.output);
  std::string word;
  while (lines >> word)
    if (word == "ops") lines >> reported;
  log_file f = read_log(path);
  REQUIRE(f.ok);
  std::printf("  killed after %lu+ ops: %zu records on disk, %zu bytes of a cut record\n", reported,
              f.records.size(), f.trailing_bytes);
  REQUIRE(f.records.size() > 0);
  // Records are consecutive from sequence 0 (nothing lost in the middle), each whole.
  for (std::size_t i = 0; i < f.records.size(); ++i) {
    if (f.records[i].sequence != i) {
      ::check::report(
          __FILE__, __LINE__,
          "record " + std::to_string(i) + " has sequence " + std::to_string(f.records[i].sequence));
      break;
    }
    const auto op = f.records[i].op;
    CHECK(op == VRAMSCOPE_OP_CUDA_MALLOC || op == VRAMSCOPE_OP_CUDA_FREE);
  }
  // At 100 µs an op, the 50 ms flush period is at most ~500 ops (plus scheduling on a busy machine).
  CHECK(f.records.size() + 2000 >= reported);
}

}  // namespace

CHECK_MAIN

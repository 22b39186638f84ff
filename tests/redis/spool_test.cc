// The client spool: journal files alone (no Redis), then clients, drains and
// the reliableq program against a redis-server the test starts, stops and
// starts again on a unix socket of its own, so that "Redis is down" is a
// socket nobody listens on yet.

#include "reliableq/spool.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"
#include "redis/connection.h"
#include "reliableq/client.h"
#include "spool/directory.h"
#include "spool/journal.h"
#include "spool/record.h"
#include "support/testutil.h"

namespace reliableq {
namespace {

using namespace std::chrono_literals;
using spool::JournalFile;
using spool::SpooledJob;
using testing::BuildPath;
using testing::ChildProcess;
using testing::RunCommand;
using testing::WaitUntil;

// A fresh directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    char templ[] = "/tmp/reliableq-spool-XXXXXX";
    REQUIRE(mkdtemp(templ) != nullptr);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string RedisServerBinary() {
  if (const char* env = std::getenv("RELIABLEQ_REDIS_SERVER"); env != nullptr && *env) return env;
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    std::string candidate = std::string(dir) + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  FAIL("redis-server is not installed; run tools/setup");
  return {};
}

// A redis-server on `dir`/redis.sock that the test starts and stops.
class RedisOnPath {
 public:
  explicit RedisOnPath(std::string dir) : dir_(std::move(dir)), socket_(dir_ + "/redis.sock") {}

  void Start() {
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{RedisServerBinary(), "--port", "0", "--unixsocket", socket_,
                                 "--save", "", "--appendonly", "no", "--dir", dir_},
        std::vector<std::string>{}, dir_ + "/redis.log");
    bool up = WaitUntil([&] { return redis::Connection::Open(Options()).ok(); }, 10s);
    REQUIRE_MESSAGE(up, "redis-server did not answer on " << socket_);
  }
  void Stop() {
    process_.reset();
    unlink(socket_.c_str());
  }
  // SIGSTOP: it takes connections (the kernel queues them) and commands
  // (into its socket buffers), and answers none until SIGCONT.
  void Signal(int signum) { process_->Signal(signum); }

  const std::string& socket() const { return socket_; }
  std::string Url() const { return "unix://" + socket_; }
  RedisOptions Options() const {
    RedisOptions options;
    options.unix_path = socket_;
    options.connect_timeout = 500ms;
    options.command_timeout = 2000ms;
    return options;
  }

  redis::Connection& Admin() {
    if (admin_ == nullptr) {
      auto opened = redis::Connection::Open(Options());
      REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
      admin_ = std::move(opened.value());
    }
    return *admin_;
  }
  void Run(const redis::Argv& argv) {
    auto reply = Admin().Command(argv);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  }
  std::vector<std::string> Strings(const redis::Argv& argv) {
    auto reply = Admin().Command(argv);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    std::vector<std::string> out;
    for (size_t i = 0; i < (*reply)->elements; ++i)
      out.emplace_back(redis::View((*reply)->element[i]));
    return out;
  }
  std::vector<std::string> Queue(const std::string& name) {
    return Strings({"LRANGE", "queue:" + name, "0", "-1"});
  }
  long long Integer(const redis::Argv& argv) {
    auto reply = Admin().Command(argv);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    return (*reply)->integer;
  }

 private:
  std::string dir_;
  std::string socket_;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<redis::Connection> admin_;
};

Job MakeJob(const std::string& job_class, const std::string& args = "[]",
            const std::string& queue = "default") {
  Job job;
  job.job_class = job_class;
  job.args = args;
  job.queue = queue;
  return job;
}

std::unique_ptr<Client> SpoolClient(const RedisOptions& redis, const std::string& dir,
                                    uint64_t max_bytes = uint64_t{1} << 30) {
  ClientOptions options;
  options.spool_dir = dir;
  options.spool_max_bytes = max_bytes;
  auto client = Client::Open(redis, options);
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  return std::move(client.value());
}

// What the process writes to its stderr (a Client's log lines, say) while
// the object lives goes to a file instead; Stop() gives it back.
class StderrCapture {
 public:
  explicit StderrCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = dup(2);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE((saved_ >= 0 && fd >= 0));
    dup2(fd, 2);
    close(fd);
  }
  ~StderrCapture() { Stop(); }
  std::string Stop() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void AppendBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

std::vector<spool::DirectoryEntry> Journals(const std::string& dir) {
  std::vector<spool::DirectoryEntry> journals;
  auto entries = spool::ListDirectory(dir);
  if (!entries.ok()) return journals;
  for (auto& entry : *entries) {
    if (entry.kind == spool::DirectoryEntry::Kind::kJournal) journals.push_back(entry);
  }
  return journals;
}

// The damaged journals set aside in `dir`.
std::vector<std::string> Corrupt(const std::string& dir) {
  std::vector<std::string> names;
  auto entries = spool::ListDirectory(dir);
  if (!entries.ok()) return names;
  for (auto& entry : *entries) {
    if (entry.kind == spool::DirectoryEntry::Kind::kCorrupt) names.push_back(entry.name);
  }
  return names;
}

// Every job record of every journal of `dir`, read straight from the
// bytes, in file order.
std::vector<SpooledJob> JobsInJournals(const std::string& dir) {
  std::vector<SpooledJob> jobs;
  for (const auto& entry : Journals(dir)) {
    std::string data = ReadAll(entry.path);
    REQUIRE(data.substr(0, spool::kMagic.size()) == spool::kMagic);
    for (size_t at = spool::kMagic.size(); at < data.size();) {
      spool::Frame frame = spool::ParseFrame(std::string_view(data).substr(at));
      if (frame.check != spool::Frame::Check::kOk) break;
      auto record = spool::DecodeRecord(frame.body);
      REQUIRE(record.ok());
      if (record->type == spool::RecordType::kJob) jobs.push_back(record->job);
      at += frame.size;
    }
  }
  return jobs;
}

SpooledJob SampleJob(int i) {
  SpooledJob job;
  job.kind = SpooledJob::Kind::kPush;
  job.spooled_at = 1700000000.5 + i;
  job.queue = "default";
  job.jid = "jid" + std::to_string(i);
  job.payload = R"({"class":"SampleJob","args":[)" + std::to_string(i) + R"(],"jid":"jid)" +
                std::to_string(i) + R"("})";
  return job;
}

std::string JobFrames(int first, int count) {
  std::string frames;
  for (int i = first; i < first + count; ++i) spool::AppendJobRecord(&frames, SampleJob(i));
  return frames;
}

// The keyspace of a client with the default prefix and no group.
const spool::Keyspace kLayout1{"reliableq:", ""};

std::unique_ptr<JournalFile> CreateJournal(const std::string& dir,
                                           const spool::Keyspace& keyspace = kLayout1) {
  auto created = JournalFile::Create(dir, keyspace);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  return std::move(created.value());
}

// The path of a journal of `dir` whose writer is gone, holding the sample
// jobs first .. first + count - 1.
std::string JournalLeftWith(const std::string& dir, int first, int count) {
  auto file = CreateJournal(dir);
  REQUIRE(file->Append(JobFrames(first, count)).ok());
  return file->path();
}

std::vector<JournalFile::Pending> ReadAllPending(JournalFile* file) {
  uint64_t from = file->drained_upto();
  std::vector<JournalFile::Pending> out;
  Status s = file->ReadPending(&from, 1000, 1 << 30, &out);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return out;
}

// ---------------------------------------------------------------------------
// The journal on disk, without Redis.

TEST_CASE("spool record: every type survives a frame and a decode") {
  SpooledJob job = SampleJob(7);
  job.kind = SpooledJob::Kind::kSchedule;
  job.at = 1800000000.25;
  std::string frames;
  spool::AppendJobRecord(&frames, job);
  spool::AppendProgressRecord(&frames, 4242);
  spool::AppendHeldRecord(&frames, 77, "WRONGTYPE at queue:x");
  spool::AppendResolvedRecord(&frames, 77, spool::Resolution::kDropped);

  std::vector<spool::Record> records;
  for (size_t at = 0; at < frames.size();) {
    spool::Frame frame = spool::ParseFrame(std::string_view(frames).substr(at));
    REQUIRE(frame.check == spool::Frame::Check::kOk);
    auto record = spool::DecodeRecord(frame.body);
    REQUIRE(record.ok());
    records.push_back(*record);
    at += frame.size;
  }
  REQUIRE(records.size() == 4);
  CHECK(records[0].type == spool::RecordType::kJob);
  CHECK(records[0].job.kind == SpooledJob::Kind::kSchedule);
  CHECK(records[0].job.at == job.at);
  CHECK(records[0].job.spooled_at == job.spooled_at);
  CHECK(records[0].job.queue == job.queue);
  CHECK(records[0].job.jid == job.jid);
  CHECK(records[0].job.payload == job.payload);
  CHECK(records[1].type == spool::RecordType::kProgress);
  CHECK(records[1].offset == 4242);
  CHECK(records[2].type == spool::RecordType::kHeld);
  CHECK(records[2].offset == 77);
  CHECK(records[2].reason == "WRONGTYPE at queue:x");
  CHECK(records[3].type == spool::RecordType::kResolved);
  CHECK(records[3].resolution == spool::Resolution::kDropped);
}

TEST_CASE("spool record: a changed byte fails the CRC, a short frame is incomplete") {
  std::string frame;
  spool::AppendJobRecord(&frame, SampleJob(1));
  for (size_t i : {size_t{0}, size_t{5}, spool::kFrameHeader + 3, frame.size() - 1}) {
    std::string damaged = frame;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x20);
    spool::Frame parsed = spool::ParseFrame(damaged);
    // A changed length may also claim more bytes than there are.
    CHECK_MESSAGE(parsed.check != spool::Frame::Check::kOk, "byte " << i);
  }
  CHECK(spool::ParseFrame(frame.substr(0, frame.size() - 1)).check ==
        spool::Frame::Check::kIncomplete);
  CHECK(spool::ParseFrame(frame.substr(0, 3)).check == spool::Frame::Check::kIncomplete);
  CHECK(spool::ParseFrame(std::string(16, '\0')).check == spool::Frame::Check::kBad);
}

TEST_CASE("spool record: a keyspace survives a frame; a drainer takes only its own keyspace") {
  std::string frame;
  spool::AppendKeyspaceRecord(&frame, {"app:", "eu-1"});
  spool::Frame parsed = spool::ParseFrame(frame);
  REQUIRE(parsed.check == spool::Frame::Check::kOk);
  auto record = spool::DecodeRecord(parsed.body);
  REQUIRE(record.ok());
  CHECK(record->type == spool::RecordType::kKeyspace);
  CHECK(record->keyspace.prefix == "app:");
  CHECK(record->keyspace.group == "eu-1");
  CHECK(spool::JournalHeader({"app:", "eu-1"}) == std::string(spool::kMagic) + frame);

  const spool::Keyspace a{"reliableq:", "A"};
  CHECK(spool::Drains(a, a));
  CHECK_FALSE(spool::Drains(a, {"reliableq:", "B"}));
  CHECK_FALSE(spool::Drains(a, {"reliableq:", ""}));
  CHECK_FALSE(spool::Drains(a, {"app:", "A"}));
  CHECK_FALSE(spool::Drains(kLayout1, {"app:", ""}));
  // Format 1 records nothing: layout 1's, whatever the prefix.
  CHECK(spool::Drains(std::nullopt, kLayout1));
  CHECK(spool::Drains(std::nullopt, {"app:", ""}));
  CHECK_FALSE(spool::Drains(std::nullopt, a));
  CHECK(spool::KeyspaceText(a) == "group 'A' (prefix 'reliableq:')");
  CHECK(spool::KeyspaceText(kLayout1) == "no group (prefix 'reliableq:')");
}

TEST_CASE("spool journal: jobs appended come back in order, and a drain's records are kept") {
  TempDir tmp;
  std::string path;
  {
    auto file = CreateJournal(tmp.path());
    path = file->path();
    CHECK(spool::IsJournalName(std::filesystem::path(path).filename().string()));
    REQUIRE(file->Append(JobFrames(0, 3)).ok());
    REQUIRE(file->Append(JobFrames(3, 2)).ok());
    auto pending = ReadAllPending(file.get());
    REQUIRE(pending.size() == 5);
    // The first two are pushed, the third held; the rest not tried.
    std::vector<JournalFile::Outcome> outcomes = {
        {pending[0].offset, JournalFile::Fate::kPushed, ""},
        {pending[1].offset, JournalFile::Fate::kPushed, ""},
        {pending[2].offset, JournalFile::Fate::kHeld, "WRONGTYPE"}};
    REQUIRE(file->RecordOutcomes(pending[3].offset, outcomes, {}, std::chrono::steady_clock::now())
                .ok());
    CHECK_FALSE(file->Drained());
  }
  // Another process's view: the lock is free once the object is gone.
  JournalFile::TailRepair repair;
  auto taken = JournalFile::TakeOver(path, &repair);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  CHECK(repair.tail == spool::JournalScan::Tail::kClean);
  CHECK(repair.what.empty());
  auto pending = ReadAllPending(taken->get());
  REQUIRE(pending.size() == 2);
  CHECK(pending[0].job.jid == "jid3");
  CHECK(pending[1].job.jid == "jid4");
  CHECK(pending[0].job.payload == SampleJob(3).payload);
  CHECK((*taken)->held_count() == 1);
  std::vector<JournalFile::Pending> held;
  REQUIRE((*taken)->DueHeld(std::chrono::steady_clock::now(), 1s, &held).ok());
  REQUIRE(held.size() == 1);
  CHECK(held[0].job.jid == "jid2");

  auto status = ReadSpoolStatus(tmp.path());
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 1);
  CHECK(status->files[0].live);  // held by `taken`
  CHECK(status->files[0].pending_jobs == 3);
  CHECK(status->files[0].held_jobs == 1);
  CHECK(status->files[0].held_reason == "WRONGTYPE");
  CHECK(status->files[0].oldest_spooled_at == SampleJob(2).spooled_at);
}

TEST_CASE("spool journal: threads appending at once each get their records whole, once") {
  TempDir tmp;
  auto file = CreateJournal(tmp.path());
  constexpr int kThreads = 8;
  constexpr int kEach = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (!file->Append(JobFrames(t * 1000 + i, 1 + i % 3)).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
  auto pending = ReadAllPending(file.get());
  // Each thread's i-th append holds 1 + i % 3 records, jids from t*1000+i up.
  size_t expected = 0;
  for (int i = 0; i < kEach; ++i) expected += 1 + i % 3;
  CHECK(pending.size() == kThreads * expected);
  CHECK(std::filesystem::file_size(file->path()) == file->size());
}

TEST_CASE("spool journal: a torn tail is dropped, never pushed half") {
  TempDir tmp;
  std::string path = JournalLeftWith(tmp.path(), 0, 3);
  uint64_t whole = std::filesystem::file_size(path);
  std::string next = JobFrames(3, 1);
  SUBCASE("a record cut short") { AppendBytes(path, next.substr(0, next.size() / 2)); }
  SUBCASE("zero bytes after the last record") { AppendBytes(path, std::string(100, '\0')); }

  auto status = ReadSpoolStatus(tmp.path());
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 1);
  CHECK(status->files[0].pending_jobs == 3);
  CHECK(status->files[0].problem.find("cut short") != std::string::npos);

  JournalFile::TailRepair repair;
  auto taken = JournalFile::TakeOver(path, &repair);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  CHECK(repair.tail == spool::JournalScan::Tail::kTorn);
  CHECK(repair.what.find("cut short") != std::string::npos);
  CHECK(Corrupt(tmp.path()).empty());
  CHECK(std::filesystem::file_size(path) == whole);
  auto pending = ReadAllPending(taken->get());
  REQUIRE(pending.size() == 3);
  CHECK(pending[2].job.jid == "jid2");
  // Appends after the cut are whole again.
  REQUIRE((*taken)->Append(JobFrames(9, 1)).ok());
  CHECK(JobsInJournals(tmp.path()).size() == 4);
}

TEST_CASE("spool journal: a whole record whose CRC fails is damage, wherever it is: set aside") {
  TempDir tmp;
  std::string path;
  uint64_t second = 0;
  {
    auto file = CreateJournal(tmp.path());
    path = file->path();
    REQUIRE(file->Append(JobFrames(0, 1)).ok());
    REQUIRE(file->Append(JobFrames(1, 2), &second).ok());
  }
  std::string data = ReadAll(path);
  uint64_t damaged = 0;
  size_t before = 0;  // the jobs before the damage
  SUBCASE("with a whole record after it") {
    damaged = second;
    before = 1;
  }
  SUBCASE("in the last record: its job was reported spooled, so no crash cut it short") {
    damaged = second + JobFrames(1, 1).size();
    before = 2;
  }
  data[damaged + spool::kFrameHeader + 40] ^= 0x01;  // one bit of its payload
  WriteAll(path, data);

  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto scan = spool::ScanJournal(fd, data.size());
  close(fd);
  REQUIRE(scan.ok());
  CHECK(scan->tail == spool::JournalScan::Tail::kCorrupt);
  CHECK(scan->valid_end == damaged);

  auto status = ReadSpoolStatus(tmp.path());
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 1);
  CHECK(status->files[0].problem.find("damaged at offset " + std::to_string(damaged)) !=
        std::string::npos);

  JournalFile::TailRepair repair;
  auto taken = JournalFile::TakeOver(path, &repair);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  CHECK(repair.tail == spool::JournalScan::Tail::kCorrupt);
  std::string kept = path + ".corrupt-" + std::to_string(damaged);
  CHECK(repair.what.find("kept as " + kept) != std::string::npos);
  // The jobs before the damage are drained; the file as it was, keyspace
  // record and all, is kept.
  auto pending = ReadAllPending(taken->get());
  REQUIRE(pending.size() == before);
  CHECK(pending[0].job.jid == "jid0");
  CHECK(ReadAll(kept) == data);
  status = ReadSpoolStatus(tmp.path());
  REQUIRE(status.ok());
  CHECK(status->corrupt_files.size() == 1);
}

TEST_CASE("spool journal: anything but a regular file is refused, a symbolic link never followed") {
  TempDir tmp;
  std::string elsewhere = JournalLeftWith(tmp.path(), 0, 1);
  const uint64_t size = std::filesystem::file_size(elsewhere);
  std::string dir = tmp.Sub("spool");
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  std::string link = dir + "/journal-0000000000001-1-00000001.spool";
  std::string fifo = dir + "/journal-0000000000002-1-00000002.spool";
  std::string sub = dir + "/journal-0000000000003-1-00000003.spool";
  REQUIRE(symlink(elsewhere.c_str(), link.c_str()) == 0);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(mkdir(sub.c_str(), 0700) == 0);

  auto entries = spool::ListDirectory(dir);
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 3);
  for (const auto& entry : *entries) CHECK(entry.kind == spool::DirectoryEntry::Kind::kNotRegular);
  CHECK((*entries)[0].type == "a symbolic link");
  CHECK((*entries)[1].type == "a FIFO");
  CHECK((*entries)[2].type == "a directory");

  for (const std::string& path : {link, fifo, sub}) {
    auto taken = JournalFile::TakeOver(path);
    CHECK_FALSE(taken.ok());
    CHECK(taken.status().message().find("not a regular file") != std::string::npos);
    CHECK_FALSE(spool::ReadJournalStart(path).ok());
  }
  CHECK(std::filesystem::file_size(elsewhere) == size);

  auto status = ReadSpoolStatus(dir);
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 3);
  CHECK(status->files[0].problem.find("a symbolic link, not a regular file") != std::string::npos);
  CHECK(status->pending_jobs == 0);
}

TEST_CASE("spool journal: its writer holds the lock; other writers get files of their own") {
  TempDir tmp;
  auto first = CreateJournal(tmp.path());
  auto second = CreateJournal(tmp.path());
  CHECK(first->path() != second->path());
  REQUIRE(first->Append(JobFrames(0, 1)).ok());

  // Held by a live writer (this process, through another open file): no
  // drainer takes it.
  auto taken = JournalFile::TakeOver(first->path());
  REQUIRE(taken.ok());
  CHECK(*taken == nullptr);
  auto status = ReadSpoolStatus(tmp.path());
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 2);
  CHECK(status->files[0].live);
  CHECK(status->files[1].live);

  // Another process: its file is locked while it lives, and free once it
  // is killed, and neither process ever writes the other's.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto created = JournalFile::Create(tmp.path(), kLayout1);
    if (!created.ok() || !(*created)->Append(JobFrames(5, 2)).ok()) _exit(3);
    std::string path = (*created)->path() + "\n";
    if (write(ready[1], path.data(), path.size()) < 0) _exit(4);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char buf[512];
  ssize_t n = read(ready[0], buf, sizeof buf);
  close(ready[0]);
  REQUIRE(n > 1);
  std::string child_path(buf, static_cast<size_t>(n) - 1);
  CHECK(child_path != first->path());
  CHECK(child_path != second->path());
  taken = JournalFile::TakeOver(child_path);
  REQUIRE(taken.ok());
  CHECK(*taken == nullptr);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  taken = JournalFile::TakeOver(child_path);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  auto pending = ReadAllPending(taken->get());
  REQUIRE(pending.size() == 2);
  CHECK(pending[0].job.jid == "jid5");
}

// A journal of format 1 as the releases before keyspaces wrote it: the old
// magic, then job records.
std::string WriteFormat1Journal(const std::string& dir, const std::string& name, int first,
                                int count) {
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << std::string(spool::kMagicV1) + JobFrames(first, count);
  return path;
}

TEST_CASE("spool journal: a journal records its keyspace; one of format 1 is still read") {
  TempDir tmp;
  std::string path;
  {
    auto file = CreateJournal(tmp.path(), {"app:", "A"});
    path = file->path();
    REQUIRE(file->keyspace() == spool::Keyspace{"app:", "A"});
    REQUIRE(file->Append(JobFrames(0, 2)).ok());
  }
  CHECK(ReadAll(path).substr(0, 8) == "RQSPOOL2");
  auto start = spool::ReadJournalStart(path);
  REQUIRE_MESSAGE(start.ok(), start.status().ToString());
  CHECK(start->format == 2);
  CHECK(start->keyspace == spool::Keyspace{"app:", "A"});
  CHECK(start->records == spool::JournalHeader({"app:", "A"}).size());
  auto taken = JournalFile::TakeOver(path);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  CHECK((*taken)->keyspace() == spool::Keyspace{"app:", "A"});
  auto pending = ReadAllPending(taken->get());
  REQUIRE(pending.size() == 2);
  CHECK(pending[0].job.jid == "jid0");
  taken->reset();

  std::string old = WriteFormat1Journal(tmp.path(), "journal-0000000000001-1-00000001.spool", 5, 3);
  start = spool::ReadJournalStart(old);
  REQUIRE_MESSAGE(start.ok(), start.status().ToString());
  CHECK(start->format == 1);
  CHECK_FALSE(start->keyspace.has_value());
  CHECK(start->records == spool::kMagicV1.size());
  taken = JournalFile::TakeOver(old);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  CHECK_FALSE((*taken)->keyspace().has_value());
  pending = ReadAllPending(taken->get());
  REQUIRE(pending.size() == 3);
  CHECK(pending[0].job.jid == "jid5");
  taken->reset();

  auto status = ReadSpoolStatus(tmp.path());
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 2);
  // Sorted by name: the format-1 file's is older.
  CHECK(status->files[0].format == 1);
  CHECK_FALSE(status->files[0].keyspace_recorded);
  CHECK(status->files[0].pending_jobs == 3);
  CHECK(status->files[1].format == 2);
  CHECK(status->files[1].keyspace_recorded);
  CHECK(status->files[1].prefix == "app:");
  CHECK(status->files[1].group == "A");
  CHECK(status->files[1].pending_jobs == 2);

  // A file of format 2 without a whole keyspace record is not read as one
  // of no keyspace.
  std::string damaged = ReadAll(path);
  damaged[spool::kMagic.size() + spool::kFrameHeader + 2] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
  start = spool::ReadJournalStart(path);
  REQUIRE_FALSE(start.ok());
  CHECK(start.status().IsCorruption());
  taken = JournalFile::TakeOver(path);
  CHECK_FALSE(taken.ok());
}

TEST_CASE("spool journal: a drained file is cut back (its writer's) or deleted (taken over)") {
  TempDir tmp;
  auto file = CreateJournal(tmp.path());
  REQUIRE(file->Append(JobFrames(0, 2)).ok());
  auto pending = ReadAllPending(file.get());
  REQUIRE(pending.size() == 2);
  REQUIRE(file->RecordOutcomes(file->size(),
                               {{pending[0].offset, JournalFile::Fate::kPushed, ""},
                                {pending[1].offset, JournalFile::Fate::kDropped, ""}},
                               {}, std::chrono::steady_clock::now())
              .ok());
  CHECK(file->Drained());
  REQUIRE(file->TruncateIfDrained().ok());
  CHECK(std::filesystem::file_size(file->path()) == spool::JournalHeader(kLayout1).size());
  // Appends after the cut start over, and are read again.
  REQUIRE(file->Append(JobFrames(7, 1)).ok());
  pending = ReadAllPending(file.get());
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].job.jid == "jid7");
  std::string path = file->path();
  file.reset();

  auto taken = JournalFile::TakeOver(path);
  REQUIRE(taken.ok());
  REQUIRE(*taken != nullptr);
  auto removed = (*taken)->RemoveIfDrained();
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);  // jid7 is pending
  pending = ReadAllPending(taken->get());
  REQUIRE((*taken)
              ->RecordOutcomes((*taken)->size(),
                               {{pending[0].offset, JournalFile::Fate::kPushed, ""}}, {},
                               std::chrono::steady_clock::now())
              .ok());
  removed = (*taken)->RemoveIfDrained();
  REQUIRE(removed.ok());
  CHECK(*removed);
  CHECK_FALSE(std::filesystem::exists(path));
}

// ---------------------------------------------------------------------------
// Clients and drains against Redis.

TEST_CASE("spool client: Redis down, pushes are spooled; once it is up they arrive, exactly once") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());  // not started: nothing listens yet
  std::string dir = tmp.Sub("spool");
  auto client = SpoolClient(redis.Options(), dir);

  std::vector<std::string> jids;
  for (int i = 0; i < 5; ++i) {
    auto pushed = client->Push(MakeJob("SpoolJob", "[" + std::to_string(i) + "]"));
    REQUIRE(pushed.ok());
    CHECK(pushed->outcome == PushOutcome::kSpooled);
    CHECK(pushed->stored());
    CHECK(pushed->reason.ok());
    jids.push_back(pushed->jid);
  }
  double at = testing::NowSeconds() + 3600;
  auto later = client->PushAt(MakeJob("LaterJob", "[1]"), at);
  REQUIRE(later.ok());
  CHECK(later->outcome == PushOutcome::kSpooled);
  auto bulk = client->PushBulk(
      {MakeJob("BulkJob", "[1]"), MakeJob("BulkJob", "[2]"), MakeJob("BulkJob", "[3]")});
  REQUIRE(bulk.ok());
  for (const PushResult& result : *bulk) {
    CHECK(result.outcome == PushOutcome::kSpooled);
    jids.push_back(result.jid);
  }

  std::vector<SpooledJob> spooled = JobsInJournals(dir);
  REQUIRE(spooled.size() == 9);
  std::multiset<std::string> expected_queue;
  for (size_t i = 0; i < spooled.size(); ++i) {
    if (spooled[i].kind == SpooledJob::Kind::kPush) expected_queue.insert(spooled[i].payload);
  }
  CHECK(spooled[5].kind == SpooledJob::Kind::kSchedule);
  CHECK(spooled[5].jid == later->jid);
  CHECK(spooled[5].at == at);
  for (size_t i = 0; i < jids.size(); ++i) {
    CHECK(spooled[i < 5 ? i : i + 1].jid == jids[i]);
  }

  redis.Start();
  bool arrived = WaitUntil(
      [&] {
        return redis.Integer({"LLEN", "queue:default"}) == 8 &&
               redis.Integer({"ZCARD", "schedule"}) == 1;
      },
      15s);
  REQUIRE(arrived);
  // The drain recorded what it pushed: nothing is pending, nothing comes twice.
  REQUIRE(WaitUntil([&] { return ReadSpoolStatus(dir)->pending_jobs == 0; }, 10s));
  std::vector<std::string> queue = redis.Queue("default");
  CHECK(std::multiset<std::string>(queue.begin(), queue.end()) == expected_queue);
  auto scheduled = redis.Strings({"ZRANGE", "schedule", "0", "-1", "WITHSCORES"});
  REQUIRE(scheduled.size() == 2);
  CHECK(scheduled[0] == spooled[5].payload);
  CHECK(std::abs(std::stod(scheduled[1]) - at) < 1e-3);

  // Once the drainer has seen Redis answer, pushes go to Redis again.
  int extra = 0;
  bool accepted = WaitUntil(
      [&] {
        ++extra;
        auto pushed = client->Push(MakeJob("AfterJob"));
        return pushed.ok() && pushed->outcome == PushOutcome::kAccepted;
      },
      10s);
  CHECK(accepted);
  REQUIRE(WaitUntil([&] { return ReadSpoolStatus(dir)->pending_jobs == 0; }, 10s));
  client.reset();
  CHECK(Journals(dir).empty());  // drained: deleted with its Client
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 8 + extra);
}

TEST_CASE("spool client: a restarted process drains what a crashed one left") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");

  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ClientOptions options;
    options.spool_dir = dir;
    auto client = Client::Open(redis.Options(), options);
    if (!client.ok()) _exit(3);
    for (int i = 0; i < 3; ++i) {
      auto pushed = (*client)->Push(MakeJob("CrashJob", "[" + std::to_string(i) + "]"));
      if (!pushed.ok() || pushed->outcome != PushOutcome::kSpooled) _exit(4);
    }
    _exit(0);  // no destructors: what a crash leaves
  }
  int wait_status = 0;
  REQUIRE(waitpid(child, &wait_status, 0) == child);
  REQUIRE(WIFEXITED(wait_status));
  REQUIRE(WEXITSTATUS(wait_status) == 0);

  auto journals = Journals(dir);
  REQUIRE(journals.size() == 1);
  std::vector<SpooledJob> spooled = JobsInJournals(dir);
  REQUIRE(spooled.size() == 3);
  // And a crash in the middle of a fourth record's write.
  std::string next = JobFrames(0, 1);
  AppendBytes(journals[0].path, next.substr(0, next.size() - 10));
  auto status = ReadSpoolStatus(dir);
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 1);
  CHECK_FALSE(status->files[0].live);
  CHECK(status->files[0].pending_jobs == 3);

  redis.Start();
  auto client = SpoolClient(redis.Options(), dir);
  bool drained = WaitUntil(
      [&] {
        return redis.Integer({"LLEN", "queue:default"}) == 3 && Journals(dir).empty();
      },
      15s);
  REQUIRE(drained);
  std::vector<std::string> queue = redis.Queue("default");
  std::multiset<std::string> expected;
  for (const SpooledJob& job : spooled) expected.insert(job.payload);
  CHECK(std::multiset<std::string>(queue.begin(), queue.end()) == expected);
}

TEST_CASE("spool client: what Redis refuses for the job's sake, or a middleware, is not spooled") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  redis.Start();
  std::string dir = tmp.Sub("spool");
  redis.Run({"SET", "queue:bad", "not a list"});

  auto client = SpoolClient(redis.Options(), dir);
  auto pushed = client->Push(MakeJob("BadJob", "[]", "bad"));
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kRefused);
  CHECK(pushed->reason.IsScript());

  ClientOptions options;
  options.spool_dir = dir;
  options.middleware.push_back([](rapidjson::Document&) { return false; });
  auto stopping = Client::Open(redis.Options(), options);
  REQUIRE(stopping.ok());
  pushed = (*stopping)->Push(MakeJob("StoppedJob"));
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kRefused);
  CHECK(pushed->reason.IsRefused());
  CHECK(JobsInJournals(dir).empty());
}

TEST_CASE("spool client: a push that would overfill the spool is refused, nothing written") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());  // never started
  std::string dir = tmp.Sub("spool");
  auto client = SpoolClient(redis.Options(), dir, /*max_bytes=*/600);
  auto small = client->Push(MakeJob("SmallJob"));
  REQUIRE(small.ok());
  REQUIRE(small->outcome == PushOutcome::kSpooled);
  auto journals = Journals(dir);
  REQUIRE(journals.size() == 1);
  uint64_t before = journals[0].bytes;

  auto big = client->Push(MakeJob("BigJob", "[\"" + std::string(1000, 'x') + "\"]"));
  REQUIRE(big.ok());
  CHECK(big->outcome == PushOutcome::kRefused);
  CHECK(big->reason.IsIoError());
  CHECK(big->reason.message().find("spool " + dir + " is full: " + std::to_string(before) +
                                   " bytes of 600") != std::string::npos);
  CHECK(Journals(dir)[0].bytes == before);
  CHECK(JobsInJournals(dir).size() == 1);
}

TEST_CASE("spool client: with Redis unreachable, pushes go straight to the spool") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  // A socket that takes connections and never answers: every call times
  // out.
  int silent = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(silent >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", redis.socket().c_str());
  REQUIRE(bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(listen(silent, 128) == 0);

  RedisOptions options = redis.Options();
  options.connect_timeout = 300ms;
  options.command_timeout = 300ms;
  std::string dir = tmp.Sub("spool");
  auto client = SpoolClient(options, dir);
  auto first = client->Push(MakeJob("PaceJob", "[0]"));
  REQUIRE(first.ok());
  CHECK(first->outcome == PushOutcome::kSpooled);

  // Each of these would wait out a 300 ms timeout if it tried Redis.
  constexpr int kPushes = 20;
  auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= kPushes; ++i) {
    auto pushed = client->Push(MakeJob("PaceJob", "[" + std::to_string(i) + "]"));
    REQUIRE(pushed.ok());
    CHECK(pushed->outcome == PushOutcome::kSpooled);
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed < kPushes * options.command_timeout / 2);

  close(silent);
  unlink(redis.socket().c_str());
  redis.Start();
  REQUIRE(WaitUntil([&] { return redis.Integer({"LLEN", "queue:default"}) == kPushes + 1; }, 15s));
  bool accepted = WaitUntil(
      [&] {
        auto pushed = client->Push(MakeJob("AfterJob"));
        return pushed.ok() && pushed->outcome == PushOutcome::kAccepted;
      },
      10s);
  CHECK(accepted);
}

TEST_CASE("spool drain: a job Redis refuses is held while the others go on, then pushed once") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  {
    auto client = SpoolClient(redis.Options(), dir);
    REQUIRE(client->Push(MakeJob("HeldJob", "[]", "bad"))->outcome == PushOutcome::kSpooled);
    REQUIRE(client->Push(MakeJob("GoodJob", "[1]"))->outcome == PushOutcome::kSpooled);
    REQUIRE(client->Push(MakeJob("GoodJob", "[2]"))->outcome == PushOutcome::kSpooled);
  }
  auto report = DrainSpool(dir, redis.Options());
  REQUIRE(report.ok());
  CHECK_FALSE(report->stopped.ok());
  CHECK(report->stopped.message().find(redis.socket()) != std::string::npos);
  CHECK(report->pushed == 0);
  CHECK(report->left == 3);

  redis.Start();
  redis.Run({"SET", "queue:bad", "not a list"});
  report = DrainSpool(dir, redis.Options());
  REQUIRE(report.ok());
  CHECK(report->stopped.ok());
  CHECK(report->pushed == 2);
  CHECK(report->held == 1);
  CHECK(report->held_reason.find("WRONGTYPE") != std::string::npos);
  CHECK(report->left == 1);
  CHECK(report->files_removed == 0);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 2);
  auto status = ReadSpoolStatus(dir);
  REQUIRE(status.ok());
  REQUIRE(status->files.size() == 1);
  CHECK(status->files[0].held_jobs == 1);
  CHECK(status->files[0].pending_jobs == 1);
  CHECK(status->files[0].held_reason.find("WRONGTYPE") != std::string::npos);

  redis.Run({"DEL", "queue:bad"});
  report = DrainSpool(dir, redis.Options());
  REQUIRE(report.ok());
  CHECK(report->stopped.ok());
  CHECK(report->pushed == 1);
  CHECK(report->held == 0);
  CHECK(report->files_removed == 1);
  CHECK(redis.Integer({"LLEN", "queue:bad"}) == 1);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 2);
  CHECK(Journals(dir).empty());
}

// The journal a client of `keyspace` leaves when its process is gone with
// jobs jid<first>.. still spooled.
std::string LeaveJournal(const std::string& dir, const spool::Keyspace& keyspace, int first,
                         int count) {
  auto file = CreateJournal(dir, keyspace);
  REQUIRE(file->Append(JobFrames(first, count)).ok());
  std::string path = file->path();
  // Names sort by their milliseconds: the next journal is younger.
  std::this_thread::sleep_for(5ms);
  return path;
}

std::unique_ptr<Client> GroupClient(RedisOptions redis, const std::string& dir,
                                    const std::string& group, const std::string& prefix) {
  redis.group = group;
  ClientOptions options;
  options.spool_dir = dir;
  options.prefix = prefix;
  auto client = Client::Open(redis, options);
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  return std::move(client.value());
}

TEST_CASE("spool client: a client drains only the journals of its own keyspace") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  REQUIRE(spool::PrepareDirectory(dir).ok());
  // Oldest first: a client that took every journal would push group A's
  // (and the others') before its own.
  std::string old = WriteFormat1Journal(dir, "journal-0000000000001-1-00000001.spool", 0, 2);
  std::string of_a = LeaveJournal(dir, {"reliableq:", "A"}, 10, 2);
  std::string of_app = LeaveJournal(dir, {"app:", ""}, 20, 1);
  std::string of_b = LeaveJournal(dir, {"reliableq:", "B"}, 30, 3);
  redis.Start();

  {
    auto client = GroupClient(redis.Options(), dir, "B", "reliableq:");
    REQUIRE(WaitUntil([&] { return !std::filesystem::exists(of_b); }, 15s));
  }
  CHECK(redis.Integer({"LLEN", "reliableq:{B}:queue:default"}) == 3);
  CHECK(redis.Integer({"LLEN", "reliableq:{A}:queue:default"}) == 0);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 0);
  CHECK(std::filesystem::exists(of_a));
  CHECK(std::filesystem::exists(of_app));
  CHECK(std::filesystem::exists(old));

  {
    // A's client, on the same Redis: the address is not part of the
    // keyspace.
    auto client = GroupClient(redis.Options(), dir, "A", "reliableq:");
    REQUIRE(WaitUntil([&] { return !std::filesystem::exists(of_a); }, 15s));
  }
  auto in_a = redis.Strings({"LRANGE", "reliableq:{A}:queue:default", "0", "-1"});
  CHECK(std::multiset<std::string>(in_a.begin(), in_a.end()) ==
        std::multiset<std::string>{SampleJob(10).payload, SampleJob(11).payload});
  CHECK(redis.Integer({"LLEN", "reliableq:{B}:queue:default"}) == 3);
  CHECK(std::filesystem::exists(old));

  {
    // Layout 1, prefix app:: its own journal, and the one of format 1
    // (layout 1, whatever the prefix); not reliableq:'s, of which there is
    // none left.
    auto client = GroupClient(redis.Options(), dir, "", "app:");
    REQUIRE(WaitUntil(
        [&] { return !std::filesystem::exists(of_app) && !std::filesystem::exists(old); }, 15s));
  }
  auto in_default = redis.Queue("default");
  CHECK(std::multiset<std::string>(in_default.begin(), in_default.end()) ==
        std::multiset<std::string>{SampleJob(0).payload, SampleJob(1).payload,
                                   SampleJob(20).payload});
  CHECK(Journals(dir).empty());
}

TEST_CASE("spool drain: only the journals of its keyspace; the others are reported and kept") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  REQUIRE(spool::PrepareDirectory(dir).ok());
  std::string old = WriteFormat1Journal(dir, "journal-0000000000001-1-00000001.spool", 0, 1);
  std::string of_a = LeaveJournal(dir, {"reliableq:", "A"}, 10, 2);
  std::string of_b = LeaveJournal(dir, {"reliableq:", "B"}, 30, 1);
  // Drained already: nothing of it to report.
  { auto empty = CreateJournal(dir, {"reliableq:", "C"}); }
  redis.Start();

  RedisOptions b = redis.Options();
  b.group = "B";
  auto report = DrainSpool(dir, b);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(report->stopped.ok());
  CHECK(report->pushed == 1);
  CHECK(report->files_removed == 1);
  REQUIRE(report->other_keyspace_files.size() == 2);
  std::string name_a = std::filesystem::path(of_a).filename().string();
  std::string name_old = std::filesystem::path(old).filename().string();
  CHECK(report->other_keyspace_files[0] ==
        name_old + ": 1 job spooled for no group (format 1: any prefix)");
  CHECK(report->other_keyspace_files[1] ==
        name_a + ": 2 jobs spooled for group 'A' (prefix 'reliableq:')");
  CHECK(redis.Integer({"LLEN", "reliableq:{B}:queue:default"}) == 1);
  CHECK(redis.Integer({"LLEN", "reliableq:{A}:queue:default"}) == 0);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 0);
  CHECK(std::filesystem::exists(of_a));
  CHECK(std::filesystem::exists(old));

  // Layout 1 of another prefix drains the format-1 journal, not A's.
  SpoolDrainOptions app;
  app.prefix = "app:";
  report = DrainSpool(dir, redis.Options(), app);
  REQUIRE(report.ok());
  CHECK(report->pushed == 1);
  REQUIRE(report->other_keyspace_files.size() == 1);
  CHECK(report->other_keyspace_files[0].find(name_a) == 0);
  CHECK(redis.Queue("default") == std::vector<std::string>{SampleJob(0).payload});
  CHECK_FALSE(std::filesystem::exists(old));
}

TEST_CASE("spool client: Open fails naming a spool directory it cannot use") {
  TempDir tmp;
  AppendBytes(tmp.Sub("file"), "x");
  ClientOptions options;
  options.spool_dir = tmp.Sub("file") + "/spool";
  RedisOptions redis;
  redis.unix_path = tmp.Sub("nothing.sock");
  auto client = Client::Open(redis, options);
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().IsIoError());
  CHECK(client.status().message().find(tmp.Sub("file")) != std::string::npos);
}

TEST_CASE("spool client: Open refuses options no connection can use before making the directory") {
  TempDir tmp;
  ClientOptions options;
  options.spool_dir = tmp.Sub("spool");
  RedisOptions redis;
  redis.cluster.seeds.push_back({"127.0.0.1", 1});  // a cluster, and no group
  auto client = Client::Open(redis, options);
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().IsInvalidArgument());
  CHECK(client.status().message().find("needs a queue group") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(options.spool_dir));
}

TEST_CASE("spool stall: pushes and drains sent to a stopped Redis store each jid once") {
  // Issue 32: Redis stopped (SIGSTOP: it takes connections and commands and
  // answers none). Each client pushes, times out and spools its job, and
  // its drainer sends the jobs of the journals the clients before it left,
  // as every drain does: each send waits in Redis's socket buffers, and
  // all of them run when it resumes.
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  redis.Start();
  std::string dir = tmp.Sub("spool");
  RedisOptions stalled = redis.Options();
  stalled.connect_timeout = 300ms;
  stalled.command_timeout = 300ms;
  // Redis holds the scripts (it served pushes before the stall): the sends
  // it runs after it resumes are EVALSHAs.
  REQUIRE(redis.Admin().LoadScripts().ok());
  redis.Signal(SIGSTOP);

  std::vector<std::string> jids;
  for (int i = 0; i < 4; ++i) {
    auto client = SpoolClient(stalled, dir);
    if (i == 1) {
      // A bulk push's batch is one script call, spooled as one.
      auto bulk = client->PushBulk({MakeJob("StallJob", "[10]"), MakeJob("StallJob", "[11]")});
      REQUIRE(bulk.ok());
      for (const PushResult& result : *bulk) {
        REQUIRE(result.outcome == PushOutcome::kSpooled);
        jids.push_back(result.jid);
      }
      continue;
    }
    auto pushed = client->Push(MakeJob("StallJob", "[" + std::to_string(i) + "]"));
    REQUIRE(pushed.ok());
    REQUIRE(pushed->outcome == PushOutcome::kSpooled);
    jids.push_back(pushed->jid);
  }
  for (int i = 0; i < 2; ++i) {
    auto report = DrainSpool(dir, stalled);
    REQUIRE(report.ok());
    CHECK_FALSE(report->stopped.ok());
  }
  redis.Signal(SIGCONT);
  // What waited in its socket buffers runs first.
  REQUIRE(WaitUntil([&] { return redis.Integer({"LLEN", "queue:default"}) > 0; }, 10s));

  auto report = DrainSpool(dir, redis.Options());
  REQUIRE(report.ok());
  CHECK_MESSAGE(report->stopped.ok(), report->stopped.ToString());
  CHECK(report->pushed == static_cast<int64_t>(jids.size()));
  // The clients' first sends ran when Redis resumed: the drain found them.
  CHECK(report->already_stored > 0);
  CHECK(Journals(dir).empty());
  std::map<std::string, int> seen;
  for (const std::string& payload : redis.Queue("default")) {
    rapidjson::Document job;
    job.Parse(payload.c_str());
    REQUIRE(job.IsObject());
    ++seen[job["jid"].GetString()];
  }
  for (const std::string& jid : jids) CHECK_MESSAGE(seen[jid] == 1, jid << " " << seen[jid]);
  CHECK(seen.size() == jids.size());
}

TEST_CASE("spool client: a push of a jid its spool's pushes stored stores nothing again") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  redis.Start();
  auto client = SpoolClient(redis.Options(), tmp.Sub("spool"));
  Job job = MakeJob("OnceJob", "[1]");
  job.jid = "once-1";
  for (int i = 0; i < 2; ++i) CHECK(client->Push(job)->outcome == PushOutcome::kAccepted);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 1);
  long long ttl = redis.Integer({"TTL", "reliableq:pushed:once-1"});
  CHECK(ttl > 3500);
  CHECK(ttl <= 3600);

  // Scheduled: the second payload differs (created_at), and still only one
  // is stored.
  Job later = MakeJob("OnceJob", "[2]");
  later.jid = "once-2";
  double at = testing::NowSeconds() + 3600;
  CHECK(client->PushAt(later, at)->outcome == PushOutcome::kAccepted);
  CHECK(client->PushAt(later, at + 1)->outcome == PushOutcome::kAccepted);
  CHECK(redis.Integer({"ZCARD", "schedule"}) == 1);

  // A batch with a jid stored already stores the others, in order.
  Job fresh = MakeJob("OnceJob", "[3]");
  fresh.jid = "once-3";
  auto bulk = client->PushBulk({job, fresh});
  REQUIRE(bulk.ok());
  CHECK((*bulk)[0].outcome == PushOutcome::kAccepted);
  CHECK((*bulk)[1].outcome == PushOutcome::kAccepted);
  auto queue = redis.Queue("default");
  REQUIRE(queue.size() == 2);
  CHECK(queue[0].find("\"jid\":\"once-3\"") != std::string::npos);

  // A client without a spool records nothing: it pays nothing for it.
  auto plain = Client::Open(redis.Options());
  REQUIRE(plain.ok());
  Job other = MakeJob("PlainJob");
  other.jid = "plain-1";
  CHECK((*plain)->Push(other)->outcome == PushOutcome::kAccepted);
  CHECK((*plain)->Push(other)->outcome == PushOutcome::kAccepted);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 4);
  CHECK(redis.Integer({"EXISTS", "reliableq:pushed:plain-1"}) == 0);

  ClientOptions zero;
  zero.spool_dir = tmp.Sub("spool");
  zero.spool_replay_window = 0s;
  auto refused = Client::Open(redis.Options(), zero);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().IsInvalidArgument());
}

TEST_CASE("spool client: a damaged journal a process left is set aside and logged, never deleted") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  std::string path;
  uint64_t last = 0;
  {
    auto file = CreateJournal(dir);
    path = file->path();
    REQUIRE(file->Append(JobFrames(0, 1)).ok());
    REQUIRE(file->Append(JobFrames(1, 1), &last).ok());
  }
  std::string data = ReadAll(path);
  data[data.size() - 3] ^= 0x10;  // the last record, whole
  WriteAll(path, data);
  redis.Start();

  StderrCapture capture(tmp.Sub("stderr"));
  std::string kept = path + ".corrupt-" + std::to_string(last);
  {
    auto client = SpoolClient(redis.Options(), dir);
    bool drained = WaitUntil(
        [&] {
          return std::filesystem::exists(kept) && Journals(dir).empty() &&
                 redis.Integer({"LLEN", "queue:default"}) == 1;
        },
        10s);
    CHECK(drained);
  }
  std::string log = capture.Stop();
  CHECK_MESSAGE(Occurrences(log, "damaged at offset " + std::to_string(last)) == 1, log);
  CHECK(ReadAll(kept) == data);
  CHECK(redis.Queue("default") == std::vector<std::string>{SampleJob(0).payload});
}

TEST_CASE("spool: a directory others can write is warned about, once per client and command") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());  // not started: pushes are spooled
  std::string dir = tmp.Sub("spool");
  std::string bin = BuildPath("RELIABLEQ_BIN");
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(chmod(dir.c_str(), 0777) == 0);
  const std::string warning = "spool directory " + dir + " can be written by others (mode 0777)";

  auto pushed = RunCommand({bin, "push", "WarnJob", "--spool", dir, "--redis", redis.Url()});
  CHECK_MESSAGE(pushed.exit_code == 0, pushed.err);
  CHECK_MESSAGE(Occurrences(pushed.err, warning) == 1, pushed.err);
  auto status = RunCommand({bin, "spool", "status", dir});
  CHECK(status.exit_code == 0);
  CHECK_MESSAGE(Occurrences(status.err, "reliableq: warning: " + warning) == 1, status.err);
  redis.Start();
  auto drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK_MESSAGE(drained.exit_code == 0, drained.err);
  CHECK_MESSAGE(Occurrences(drained.err, "reliableq: warning: " + warning) == 1, drained.err);

  REQUIRE(chmod(dir.c_str(), 0770) == 0);
  status = RunCommand({bin, "spool", "status", dir});
  CHECK(status.err.find("can be written by its group (mode 0770)") != std::string::npos);
  REQUIRE(chmod(dir.c_str(), 0700) == 0);
  status = RunCommand({bin, "spool", "status", dir});
  CHECK(status.err.empty());
  pushed = RunCommand({bin, "push", "WarnJob", "--spool", dir, "--redis", redis.Url()});
  CHECK(pushed.err.find("can be written") == std::string::npos);
}

// ---------------------------------------------------------------------------
// The reliableq program.

TEST_CASE("spool cli: push --spool, spool status, spool drain: messages and exit codes") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  std::string bin = BuildPath("RELIABLEQ_BIN");

  auto pushed = RunCommand({bin, "push", "CliJob", "[1]", "--spool", dir, "--redis", redis.Url()});
  CHECK_MESSAGE(pushed.exit_code == 0, pushed.err);
  std::string jid = pushed.out.substr(0, pushed.out.find('\n'));
  CHECK(jid.size() == 24);
  CHECK(pushed.err.find("spooled") != std::string::npos);

  auto status = RunCommand({bin, "spool", "status", dir});
  CHECK_MESSAGE(status.exit_code == 0, status.err);
  CHECK(status.out.find("1 journal, 1 job pending") != std::string::npos);
  auto json = RunCommand({bin, "spool", "status", dir, "--json"});
  REQUIRE_MESSAGE(json.exit_code == 0, json.err);
  rapidjson::Document doc;
  doc.Parse(json.out.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(doc["pending_jobs"].GetInt64() == 1);
  REQUIRE(doc["files"].Size() == 1);
  CHECK(doc["files"][0]["live"].GetBool() == false);
  CHECK(doc["files"][0]["pending_jobs"].GetInt64() == 1);

  // Redis unreachable: says where, exit 1, no hang.
  auto down = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()}, 15s);
  CHECK(down.exit_code == 1);
  CHECK(down.err.find(redis.socket()) != std::string::npos);
  CHECK(down.err.find("1 job left") != std::string::npos);

  redis.Start();
  auto drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK_MESSAGE(drained.exit_code == 0, drained.err);
  CHECK(drained.out.find("pushed 1 job") != std::string::npos);
  auto queue = redis.Queue("default");
  REQUIRE(queue.size() == 1);
  CHECK(queue[0].find("\"jid\":\"" + jid + "\"") != std::string::npos);
  status = RunCommand({bin, "spool", "status", dir});
  CHECK(status.out.find("0 journals, 0 jobs pending") != std::string::npos);
  // Nothing left: a second drain pushes nothing and succeeds.
  drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK(drained.exit_code == 0);
  CHECK(drained.out.find("pushed 0 jobs") != std::string::npos);
  CHECK(redis.Queue("default").size() == 1);

  // Bad arguments: one line, exit 2.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{bin, "spool"},
                                             {bin, "spool", "frob", dir},
                                             {bin, "spool", "status"},
                                             {bin, "spool", "status", dir, "extra"},
                                             {bin, "spool", "drain", dir, "--json"},
                                             {bin, "spool", "drain", dir, "--wait-timeout", "5"},
                                             {bin, "spool", "drain", dir, "--replay-window", "0"},
                                             {bin, "spool", "status", dir, "--replay-window", "9"},
                                             {bin, "push", "X", "--spool", ""}}) {
    auto bad = RunCommand(args);
    CHECK_MESSAGE(bad.exit_code == 2, args[1] << " " << (args.size() > 2 ? args[2] : ""));
    CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  }
  auto missing = RunCommand({bin, "spool", "status", tmp.Sub("missing")});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find(tmp.Sub("missing")) != std::string::npos);
}

TEST_CASE("spool cli: a job spooled for group A is drained into group A, never another's") {
  TempDir tmp;
  std::string dir = tmp.Sub("spool");
  std::string bin = BuildPath("RELIABLEQ_BIN");
  // A's Redis is down (nothing listens on its port); B's is up.
  std::string down = "redis://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()) + "/0";
  int up_port = testing::FreeLoopbackPort();
  testing::RedisServer up({"--port", std::to_string(up_port), "--bind", "127.0.0.1"});
  std::string up_url = "redis://127.0.0.1:" + std::to_string(up_port) + "/0";
  auto admin = redis::Connection::Open(up.Options());
  REQUIRE(admin.ok());
  auto length = [&](const std::string& key) {
    auto reply = (*admin)->Command({"LLEN", key});
    REQUIRE(reply.ok());
    return (*reply)->integer;
  };

  auto spooled = RunCommand(
      {bin, "--redis", down, "--group", "A", "push", "NoopJob", "[\"for-A\"]", "--spool", dir});
  REQUIRE_MESSAGE(spooled.exit_code == 0, spooled.err);
  CHECK(spooled.err.find("spooled") != std::string::npos);
  auto pushed = RunCommand(
      {bin, "--redis", up_url, "--group", "B", "push", "NoopJob", "[\"for-B\"]", "--spool", dir});
  REQUIRE_MESSAGE(pushed.exit_code == 0, pushed.err);
  auto drained = RunCommand({bin, "--redis", up_url, "--group", "B", "spool", "drain", dir});
  CHECK(drained.exit_code == 1);
  CHECK(drained.out.find("pushed 0 jobs") != std::string::npos);
  CHECK(drained.err.find("reliableq: left for a drain of its own keyspace: journal-") == 0);
  CHECK(drained.err.find(": 1 job spooled for group 'A' (prefix 'reliableq:')\n") !=
        std::string::npos);
  CHECK(std::count(drained.err.begin(), drained.err.end(), '\n') == 1);
  CHECK(length("reliableq:{B}:queue:default") == 1);
  CHECK(length("reliableq:{A}:queue:default") == 0);

  auto status = RunCommand({bin, "spool", "status", dir});
  CHECK_MESSAGE(status.exit_code == 0, status.err);
  CHECK(status.out.find("keyspace") != std::string::npos);
  CHECK(status.out.find("reliableq:{A}:") != std::string::npos);
  auto json = RunCommand({bin, "spool", "status", dir, "--json"});
  REQUIRE_MESSAGE(json.exit_code == 0, json.err);
  rapidjson::Document doc;
  doc.Parse(json.out.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  REQUIRE(doc["files"].Size() == 1);
  CHECK(doc["files"][0]["format"].GetInt() == 2);
  CHECK(std::string(doc["files"][0]["prefix"].GetString()) == "reliableq:");
  CHECK(std::string(doc["files"][0]["group"].GetString()) == "A");

  // Group A's drain, at B's address: the job goes to group A there.
  drained = RunCommand({bin, "--redis", up_url, "--group", "A", "spool", "drain", dir});
  CHECK_MESSAGE(drained.exit_code == 0, drained.err);
  CHECK(drained.out.find("pushed 1 job") != std::string::npos);
  CHECK(length("reliableq:{A}:queue:default") == 1);
  CHECK(length("reliableq:{B}:queue:default") == 1);
  CHECK(Journals(dir).empty());
}

// `reliableq push --spool DIR` while `redis` is down: the one journal it
// leaves, with its one job.
spool::DirectoryEntry SpoolOnePush(const std::string& bin, const std::string& dir,
                                   const RedisOnPath& redis) {
  auto pushed = RunCommand({bin, "push", "CliJob", "[1]", "--spool", dir, "--redis", redis.Url()});
  REQUIRE_MESSAGE(pushed.exit_code == 0, pushed.err);
  auto journals = Journals(dir);
  REQUIRE(journals.size() == 1);
  return journals[0];
}

TEST_CASE("spool cli: a flipped bit in a journal is damage: set aside, reported, exit 1") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  std::string bin = BuildPath("RELIABLEQ_BIN");
  const spool::DirectoryEntry journal = SpoolOnePush(bin, dir, redis);
  const std::string name = journal.name;
  // One bit of its only job's payload: a whole record whose CRC fails.
  std::string data = ReadAll(journal.path);
  data[data.size() - 2] ^= 0x01;
  WriteAll(journal.path, data);
  uint64_t job_offset = spool::JournalHeader(kLayout1).size();

  redis.Start();
  auto drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK(drained.exit_code == 1);
  CHECK_MESSAGE(drained.err.find("reliableq: damaged: " + name + ": damaged at offset " +
                                 std::to_string(job_offset)) == 0,
                drained.err);
  CHECK(drained.err.find("kept as " + dir + "/" + name + ".corrupt-") != std::string::npos);
  CHECK(std::count(drained.err.begin(), drained.err.end(), '\n') == 1);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 0);
  REQUIRE(Corrupt(dir).size() == 1);
  std::string kept = dir + "/" + Corrupt(dir)[0];
  CHECK(ReadAll(kept) == data);

  // It stays a failure until a person has dealt with it.
  auto status = RunCommand({bin, "spool", "status", dir});
  CHECK(status.out.find("damaged journal set aside (never drained): " + Corrupt(dir)[0]) !=
        std::string::npos);
  drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK(drained.exit_code == 1);
  CHECK(drained.err.find("set aside earlier") != std::string::npos);
  REQUIRE(unlink(kept.c_str()) == 0);
  drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK_MESSAGE(drained.exit_code == 0, drained.err);
}

TEST_CASE("spool cli: a record a crash cut short is dropped, and the drain says so") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  std::string dir = tmp.Sub("spool");
  std::string bin = BuildPath("RELIABLEQ_BIN");
  const spool::DirectoryEntry journal = SpoolOnePush(bin, dir, redis);
  std::string next = JobFrames(0, 1);
  AppendBytes(journal.path, next.substr(0, next.size() / 2));

  redis.Start();
  auto drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK_MESSAGE(drained.exit_code == 0, drained.err);
  CHECK(drained.out.find("pushed 1 job") != std::string::npos);
  CHECK_MESSAGE(drained.out.find("dropped the end of " + journal.name +
                                 ": a record cut short at offset " + std::to_string(journal.bytes) +
                                 " (" + std::to_string(next.size() / 2) + " bytes") !=
                    std::string::npos,
                drained.out);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 1);
  CHECK(Corrupt(dir).empty());
}

TEST_CASE("spool cli: a symbolic link named like a journal is refused, never followed") {
  TempDir tmp;
  RedisOnPath redis(tmp.path());
  redis.Start();
  std::string bin = BuildPath("RELIABLEQ_BIN");
  std::string elsewhere = JournalLeftWith(tmp.path(), 0, 1);
  const std::string before = ReadAll(elsewhere);
  std::string dir = tmp.Sub("spool");
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  std::string name = std::filesystem::path(elsewhere).filename().string();
  REQUIRE(symlink(elsewhere.c_str(), (dir + "/" + name).c_str()) == 0);

  auto drained = RunCommand({bin, "spool", "drain", dir, "--redis", redis.Url()});
  CHECK(drained.exit_code == 1);
  CHECK_MESSAGE(drained.err == "reliableq: left alone: " + name + ": it is a symbolic link, " +
                                   "not a regular file: refused, never read or drained\n",
                drained.err);
  CHECK(redis.Integer({"LLEN", "queue:default"}) == 0);
  CHECK(ReadAll(elsewhere) == before);

  // A client's drainer leaves it too, while it drains a journal beside it.
  JournalLeftWith(dir, 5, 1);
  {
    auto client = SpoolClient(redis.Options(), dir);
    REQUIRE(WaitUntil([&] { return Journals(dir).empty(); }, 10s));
  }
  CHECK(redis.Queue("default") == std::vector<std::string>{SampleJob(5).payload});
  CHECK(ReadAll(elsewhere) == before);
  struct stat st;
  CHECK((lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
}

}  // namespace
}  // namespace reliableq

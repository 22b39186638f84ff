#include "codec/job_codec.h"

#include "support/backtrace_decode.h"
#include "reliableq/handler.h"

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <doctest/doctest.h>

#include <charconv>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace reliableq {

using namespace reliableq::codec;

namespace {

using testing::Base64Decode;
using testing::Inflate;

Job MakeJob(std::string args = "[]", std::string extra = "{}") {
  Job job;
  job.job_class = "HardJob";
  job.args = std::move(args);
  job.extra = std::move(extra);
  job.jid = "0123456789abcdef01234567";
  return job;
}

std::vector<std::string> Keys(const rapidjson::Value& object) {
  std::vector<std::string> keys;
  for (const auto& member : object.GetObject()) keys.emplace_back(member.name.GetString());
  return keys;
}

// A job as Sidekiq 6.4.1 writes it after one failure: its defaults come
// first, then the item's fields, then the retry bookkeeping, with extras.
const char kRubyPayload[] =
    R"({"retry":5,"queue":"default","backtrace":true,"class":"HardJob",)"
    R"("args":[1,"bob",{"k":[1.5,null,true]},-7,1.0e-07],"jid":"b4a577edbccf1d805744efa9",)"
    R"("created_at":1700000000.1234567,"enqueued_at":1700000000.123456,)"
    R"("error_message":"undefined method `x' for nil:NilClass","error_class":"NoMethodError",)"
    R"("failed_at":1700000001.5,"retry_count":0,)"
    R"("error_backtrace":"eJyLVkpUigUABBgBXg==\n","tags":["a/b","é"],)"
    R"("wrapped":"Mailer","bid":"Xy/z"})";

TEST_CASE("EncodeJob writes Sidekiq's fields in order, compactly") {
  Job job = MakeJob(" [1, 2,\n \"x\"] ");
  auto json = EncodeJob(job, 1700000000.5, 1700000001.25);
  REQUIRE(json.ok());
  CHECK(*json == R"({"class":"HardJob","args":[1,2,"x"],"queue":"default","retry":true,)"
                 R"("jid":"0123456789abcdef01234567","created_at":1700000000.5,)"
                 R"("enqueued_at":1700000001.25})");
}

TEST_CASE("EncodeJob leaves enqueued_at out of a scheduled job and writes retry as given") {
  Job job = MakeJob();
  job.queue = "low";
  job.retry = Retry::Times(3);
  auto json = EncodeJob(job, 1700000000.0, std::nullopt);
  REQUIRE(json.ok());
  CHECK(*json == R"({"class":"HardJob","args":[],"queue":"low","retry":3,)"
                 R"("jid":"0123456789abcdef01234567","created_at":1700000000.0})");
  job.retry = Retry::Disabled();
  json = EncodeJob(job, 1700000000.0, std::nullopt);
  REQUIRE(json.ok());
  CHECK(json->find(R"("retry":false,)") != std::string::npos);
}

TEST_CASE("timestamps in payloads are floats with at most microsecond digits") {
  auto json = EncodeJob(MakeJob(), 1700000000.1234567, 1700000000.9999999);
  REQUIRE(json.ok());
  CHECK(json->find(R"("created_at":1700000000.123457,)") != std::string::npos);
  CHECK(json->find(R"("enqueued_at":1700000001.0})") != std::string::npos);
}

TEST_CASE("EncodeJob gives a new jid when none is set") {
  Job job = MakeJob();
  job.jid.clear();
  auto a = EncodeJob(job, 1, 1);
  auto b = EncodeJob(job, 1, 1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto da = DecodeJob(*a);
  auto db = DecodeJob(*b);
  REQUIRE(da.ok());
  REQUIRE(db.ok());
  std::string jid_a = da->document["jid"].GetString();
  CHECK(jid_a.size() == 24);
  CHECK(jid_a != db->document["jid"].GetString());
}

TEST_CASE("a round trip keeps unknown keys, their order and every float exactly") {
  Job job = MakeJob(R"([1700000000.1234567, 0.1, 1e-7, 1.0, 100, -0.0, 18446744073709551615,
                        -9223372036854775808, {"b": 1, "a": [2.5e300]}])",
                    R"({"zeta": 1, "alpha": {"y": 2, "x": 3}, "tags": ["a"], "retry_queue": "q"})");
  auto json = EncodeJob(job, 1700000000.25, 1700000000.5);
  REQUIRE(json.ok());
  CHECK(json->find(R"("args":[1700000000.1234567,0.1,1.0e-07,1.0,100,-0.0,18446744073709551615,)"
                   R"(-9223372036854775808,{"b":1,"a":[2.5e+300]}])") != std::string::npos);

  auto decoded = DecodeJob(*json);
  REQUIRE(decoded.ok());
  const rapidjson::Document& doc = decoded->document;
  CHECK(Keys(doc) == std::vector<std::string>{"class", "args", "queue", "retry", "jid",
                                              "created_at", "enqueued_at", "zeta", "alpha", "tags",
                                              "retry_queue"});
  CHECK(Keys(doc["alpha"]) == std::vector<std::string>{"y", "x"});
  const rapidjson::Value& args = doc["args"];
  CHECK(args[0].GetDouble() == 1700000000.1234567);
  CHECK(args[1].GetDouble() == 0.1);
  CHECK(args[2].GetDouble() == 1e-7);
  CHECK(args[3].IsDouble());
  CHECK(args[4].IsInt());
  CHECK(args[6].GetUint64() == 18446744073709551615ULL);
  CHECK(doc["created_at"].IsDouble());
  CHECK(doc["created_at"].GetDouble() == 1700000000.25);
  // Decoding and writing again changes no byte.
  CHECK(ToJson(doc) == *json);
}

TEST_CASE("strings are raw UTF-8, '/' is not escaped, control characters are") {
  auto json = EncodeJob(MakeJob(R"(["é/ü", "\u00e9\u2028", "a\"b\\c\n\t\r\b\f\u0001\u001f"])"), 1,
                        std::nullopt);
  REQUIRE(json.ok());
  std::string expected = "\"args\":[\"é/ü\",\"é\xE2\x80\xA8\",";
  expected += R"("a\"b\\c\n\t\r\b\f\u0001\u001f"])";
  CHECK(json->find(expected) != std::string::npos);
}

TEST_CASE("floats are written as Ruby's Float#to_s writes them") {
  const std::pair<const char*, const char*> cases[] = {
      {"[1.0]", "[1.0]"},
      {"[1e2]", "[100.0]"},
      {"[1e15]", "[1000000000000000.0]"},
      {"[1e16]", "[1.0e+16]"},
      {"[1.5e16]", "[1.5e+16]"},
      {"[0.0001]", "[0.0001]"},
      {"[0.00001]", "[1.0e-05]"},
      {"[1.25e-5]", "[1.25e-05]"},
      {"[5e-324]", "[5.0e-324]"},
      {"[-0.0]", "[-0.0]"},
      {"[0.0]", "[0.0]"},
      {"[123456.789]", "[123456.789]"},
      {"[-1.5e300]", "[-1.5e+300]"},
      {"[0.30000000000000004]", "[0.30000000000000004]"},
  };
  for (const auto& [in, out] : cases) {
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseFullPrecisionFlag>(in);
    REQUIRE(!doc.HasParseError());
    CHECK_MESSAGE(ToJson(doc) == out, in);
  }
}

TEST_CASE("a payload written by Sidekiq decodes and dumps to the same bytes") {
  auto decoded = DecodeJob(kRubyPayload);
  REQUIRE(decoded.ok());
  const rapidjson::Document& doc = decoded->document;
  CHECK(std::string(doc["class"].GetString()) == "HardJob");
  CHECK(doc["args"].Size() == 5);
  CHECK(doc["retry_count"].GetInt() == 0);
  CHECK(doc["created_at"].GetDouble() == 1700000000.1234567);
  CHECK(ToJson(doc) == kRubyPayload);
}

TEST_CASE("DecodeJob refuses what is not a job") {
  const char* bad[] = {
      "",
      "not json",
      R"({"class":"A","args":[]} trailing)",
      "[]",
      R"("text")",
      R"({"args":[]})",
      R"({"class":1,"args":[]})",
      R"({"class":"A"})",
      R"({"class":"A","args":{}})",
      R"({"class":"A","args":"[]"})",
  };
  for (const char* raw : bad) {
    auto decoded = DecodeJob(raw);
    CHECK_MESSAGE(decoded.status().IsCorruption(), raw);
  }
  CHECK(DecodeJob(R"({"class":"A","args":[]})").ok());
}

// A NUL byte is never part of JSON text (a string holds one as \u0000), but
// RapidJSON's streams take one for the end of the text.
TEST_CASE("DecodeJob refuses a raw NUL byte anywhere and names its offset") {
  const std::string job = R"({"class":"A","args":[]})";
  const std::string nul(1, '\0');
  for (const std::string& raw :
       {job + nul + "garbage", job + nul, job + " " + nul, job + nul + job,
        std::string(R"({"class":"A)") + nul + R"(B","args":[]})",
        std::string(R"({"class":"A",)") + nul + R"("args":[]})"}) {
    auto decoded = DecodeJob(raw);
    REQUIRE_MESSAGE(decoded.status().IsCorruption(), raw);
    std::string expected = "NUL byte at offset " + std::to_string(raw.find('\0'));
    CHECK_MESSAGE(decoded.status().message().find(expected) != std::string::npos,
                  decoded.status().message());
  }
  // Trailing text after the job is refused the same way.
  CHECK(DecodeJob(job + " xyz").status().IsCorruption());
  // As JSON escapes it, a NUL is fine.
  auto escaped = DecodeJob(R"({"class":"A\u0000B","args":["\u0000"]})");
  REQUIRE(escaped.ok());
  CHECK(escaped->document["class"].GetStringLength() == 3);
  CHECK(ToJson(escaped->document) == R"({"class":"A\u0000B","args":["\u0000"]})");
}

TEST_CASE("RecordFailure, EncodeJob and WideIntegers::Find refuse a raw NUL byte too") {
  const std::string nul(1, '\0');
  FailureInfo info;
  info.error_class = "E";
  info.fetched_queue = "q";
  info.now = 1700000000;
  auto failed = RecordFailure(R"({"class":"A","args":[]})" + nul + "junk", info);
  CHECK(failed.status().IsCorruption());
  CHECK_MESSAGE(failed.status().message().find("NUL byte at offset 23") != std::string::npos,
                failed.status().message());

  auto args = EncodeJob(MakeJob("[1]" + nul + "[2]"), 1, 1);
  CHECK(args.status().IsInvalidArgument());
  CHECK_MESSAGE(args.status().message().find("NUL byte at offset 3") != std::string::npos,
                args.status().message());
  auto extra = EncodeJob(MakeJob("[]", R"({"a":1})" + nul + R"(,"b":2})"), 1, 1);
  CHECK(extra.status().IsInvalidArgument());
  CHECK_MESSAGE(extra.status().message().find("NUL byte at offset 7") != std::string::npos,
                extra.status().message());
  // Escaped, it is a character like any other.
  CHECK(EncodeJob(MakeJob(R"(["\u0000"])", R"({"a":"\u0000"})"), 1, 1).ok());

  // Not valid JSON: no wide integers.
  CHECK(WideIntegers::Find("[18446744073709551616]" + nul + "x").empty());
  CHECK_FALSE(WideIntegers::Find("[18446744073709551616]").empty());
}

// Ruby's JSON.parse (and so Sidekiq) makes each object a Hash: a name given
// again keeps the place where it first stood and takes its last value.
// Expected texts are Ruby's: JSON.generate(JSON.parse(raw)).
TEST_CASE("DecodeJob reads duplicate member names as Sidekiq does: the last value wins") {
  const char raw[] = R"({"class":"First","args":[1],"queue":"a","class":"Last",)"
                     R"("args":[{"k":1,"k":2}],"jid":"x","retry_count":0,"jid":"y",)"
                     R"("retry_count":3})";
  auto decoded = DecodeJob(raw);
  REQUIRE(decoded.ok());
  const rapidjson::Document& doc = decoded->document;
  CHECK(Keys(doc) == std::vector<std::string>{"class", "args", "queue", "jid", "retry_count"});
  CHECK(ToJson(doc) ==
        R"({"class":"Last","args":[{"k":2}],"queue":"a","jid":"y","retry_count":3})");
  // What a handler sees.
  JobView job(raw, "a", doc);
  CHECK(job.job_class() == "Last");
  CHECK(job.jid() == "y");
  CHECK(job.retry_count() == 3);
  REQUIRE(job.args().Size() == 1);
  REQUIRE(job.args()[0].IsObject());
  CHECK(job.args()[0]["k"].GetInt() == 2);
  CHECK(job.args()[0].MemberCount() == 1);
}

TEST_CASE("DecodeJob checks class and args as Sidekiq reads them") {
  // The last "class" is a number: Sidekiq has no class to run.
  CHECK(DecodeJob(R"({"class":"A","args":[],"class":1})").status().IsCorruption());
  CHECK(DecodeJob(R"({"class":"A","args":[],"args":{}})").status().IsCorruption());
  // The last ones are right: a job.
  auto decoded = DecodeJob(R"({"class":1,"args":{},"class":"B","args":[7]})");
  REQUIRE(decoded.ok());
  CHECK(ToJson(decoded->document) == R"({"class":"B","args":[7]})");
  // Many duplicates of many names, beyond the small-object path.
  std::string many = R"({"class":"A","args":[])";
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 40; ++i) {
      many += ",\"f" + std::to_string(i) + "\":" + std::to_string(round * 100 + i);
    }
  }
  many += R"(,"class":"Z"})";
  auto big = DecodeJob(many);
  REQUIRE(big.ok());
  CHECK(big->document.MemberCount() == 42);
  CHECK(std::string(big->document["class"].GetString()) == "Z");
  CHECK(big->document.MemberBegin()->name == "class");
  CHECK(big->document["f0"].GetInt() == 200);
  CHECK(big->document["f39"].GetInt() == 239);
  CHECK((big->document.MemberBegin() + 2)->name == "f0");
}

TEST_CASE("EncodeJob writes extra fields given twice once, with the last value") {
  auto json = EncodeJob(MakeJob(R"([{"a":1,"b":2,"a":3}])", R"({"tags":["a"],"x":1,"tags":["b"]})"),
                        1700000000.5, std::nullopt);
  REQUIRE(json.ok());
  CHECK(*json == R"({"class":"HardJob","args":[{"a":3,"b":2}],"queue":"default","retry":true,)"
                 R"("jid":"0123456789abcdef01234567","created_at":1700000000.5,)"
                 R"("tags":["b"],"x":1})");
}

TEST_CASE("wide integers under a name given twice are those of its last value") {
  const char raw[] = R"({"class":"A","args":[],"big":18446744073709551616,)"
                     R"("big":18446744073709551617,"n":{"w":[99999999999999999999]},)"
                     R"("n":{"w":[1e20]}})";
  auto decoded = DecodeJob(raw);
  REQUIRE(decoded.ok());
  // Ruby: {"class":"A","args":[],"big":18446744073709551617,"n":{"w":[1.0e+20]}}
  CHECK(ToJson(decoded->document, WideIntegers::Find(raw)) ==
        R"({"class":"A","args":[],"big":18446744073709551617,"n":{"w":[1.0e+20]}})");
}

TEST_CASE("DecodeJob refuses nesting deeper than Sidekiq can read") {
  // The job object, args and 98 more arrays: 100 levels.
  std::string ok = R"({"class":"A","args":)" + std::string(99, '[') + std::string(99, ']') + "}";
  CHECK(DecodeJob(ok).ok());
  std::string deep =
      R"({"class":"A","args":)" + std::string(100, '[') + std::string(100, ']') + "}";
  CHECK(DecodeJob(deep).status().IsCorruption());
  // Far too deep for a recursive parser: refused, not a crash.
  std::string hostile = R"({"class":"A","args":)" + std::string(200000, '[');
  CHECK(DecodeJob(hostile).status().IsCorruption());
}

TEST_CASE("EncodeJob refuses invalid jobs with a one-line reason") {
  auto check_invalid = [](const Job& job, const char* reason) {
    auto json = EncodeJob(job, 1700000000, 1700000000);
    CHECK_MESSAGE(json.status().IsInvalidArgument(), reason);
    CHECK(json.status().message().find('\n') == std::string::npos);
    CHECK(!json.status().message().empty());
  };
  Job job = MakeJob();
  job.job_class = "";
  check_invalid(job, "empty class");
  job = MakeJob();
  job.job_class = "Bad\xff";
  check_invalid(job, "class not UTF-8");
  job = MakeJob();
  job.queue = "";
  check_invalid(job, "empty queue");
  check_invalid(MakeJob("[1,"), "args not JSON");
  check_invalid(MakeJob(""), "args empty");
  check_invalid(MakeJob("[1] [2]"), "args with trailing text");
  check_invalid(MakeJob(R"({"a":1})"), "args an object");
  check_invalid(MakeJob("1"), "args a number");
  check_invalid(MakeJob("[\"\xff\"]"), "args not UTF-8");
  check_invalid(MakeJob(std::string(100, '[') + std::string(100, ']')), "args too deep");
  check_invalid(MakeJob("[]", "[]"), "extra an array");
  check_invalid(MakeJob("[]", "{"), "extra not JSON");
  for (const char* reserved :
       {"class", "args", "queue", "retry", "jid", "created_at", "enqueued_at", "at"}) {
    check_invalid(MakeJob("[]", std::string("{\"") + reserved + "\":1}"), reserved);
  }
  job = MakeJob();
  job.retry = Retry::Times(-1);
  check_invalid(job, "negative retry");
  job = MakeJob();
  job.jid = "abc\ndef";
  check_invalid(job, "jid not printable");
  job = MakeJob();
  job.jid = "jid-\xc3\xa9";
  check_invalid(job, "jid not ASCII");
  // The limits themselves are fine.
  CHECK(EncodeJob(MakeJob(std::string(99, '[') + std::string(99, ']')), 1, 1).ok());
  CHECK(EncodeJob(MakeJob("[]", R"({"backtrace":true,"retry_queue":"low","at2":1})"), 1, 1).ok());
}

TEST_CASE("FormatEpoch always has six decimals") {
  CHECK(FormatEpoch(1700000000) == "1700000000.000000");
  CHECK(FormatEpoch(1700000000.123456) == "1700000000.123456");
  CHECK(FormatEpoch(0.5) == "0.500000");
  for (double t : {0.0, 1.0, 1e9, 1700000000.0, 4102444800.0, 1700000000.999999}) {
    std::string text = FormatEpoch(t);
    CHECK(text.find('.') == text.size() - 7);
  }
}

// Found while writing tests/fuzz: FormatEpoch wrote into 64 bytes and
// returned as many bytes as the number needed, reading past the buffer for
// a time of 1e57 s or more (a client's PushIn with a huge delay).
TEST_CASE("FormatEpoch writes any finite time whole") {
  for (double t : {1e57, 1e100, -1e300, 1.7976931348623157e308}) {
    char expected[400];
    auto end = std::to_chars(expected, expected + sizeof(expected), t, std::chars_format::fixed, 6);
    CHECK(FormatEpoch(t) == std::string(expected, end.ptr));
  }
  auto json = EncodeJob(MakeJob(), 1e300, 1.7976931348623157e308);
  REQUIRE(json.ok());
  CHECK(json->find(R"("created_at":1.0e+300,"enqueued_at":1.7976931348623157e+308)") !=
        std::string::npos);
}

TEST_CASE("Retry parses and writes its three forms") {
  CHECK(*Retry::Parse("true") == Retry::Enabled());
  CHECK(*Retry::Parse("false") == Retry::Disabled());
  CHECK(*Retry::Parse("0") == Retry::Times(0));
  CHECK(*Retry::Parse("25") == Retry::Times(25));
  for (const char* bad : {"", "-1", "yes", "True", "1.5", " 3", "1234567890", "+2"}) {
    CHECK_MESSAGE(Retry::Parse(bad).status().IsInvalidArgument(), bad);
  }
  CHECK(Retry::Enabled().ToJson() == "true");
  CHECK(Retry::Disabled().ToJson() == "false");
  CHECK(Retry::Times(7).ToJson() == "7");
}

TEST_CASE("jids are 24 lowercase hex digits and differ") {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    std::string jid = NewJid();
    REQUIRE(jid.size() == 24);
    CHECK(jid.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(jid);
  }
  CHECK(seen.size() == 10000);
}

TEST_CASE("a forked child does not repeat its parent's jids") {
  NewJid();  // fills this thread's buffer of random bytes
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::string jid = NewJid();
    ssize_t n = write(fds[1], jid.data(), jid.size());
    _exit(n == static_cast<ssize_t>(jid.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string parent = NewJid();
  char buf[32] = {};
  ssize_t n = read(fds[0], buf, sizeof(buf));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(n == 24);
  CHECK(std::string(buf, 24) != parent);
}

TEST_CASE("RecordFailure on a first failure") {
  const char raw[] = R"({"class":"HardJob","args":[1.5],"queue":"default","retry":true,"jid":"j1",)"
                     R"("created_at":1700000000.5,"enqueued_at":1700000000.5,"zz":{"b":1,"a":2}})";
  FailureInfo info;
  info.error_class = "RuntimeError";
  info.error_message = "boom \"quoted\"";
  info.fetched_queue = "critical";
  info.now = 1700000100.25;
  auto out = RecordFailure(raw, info);
  REQUIRE(out.ok());
  CHECK(*out == R"({"class":"HardJob","args":[1.5],"queue":"critical","retry":true,"jid":"j1",)"
                R"("created_at":1700000000.5,"enqueued_at":1700000000.5,"zz":{"b":1,"a":2},)"
                R"("error_message":"boom \"quoted\"","error_class":"RuntimeError",)"
                R"("failed_at":1700000100.25,"retry_count":0})");
}

TEST_CASE("RecordFailure on a later failure replaces fields in place") {
  const char raw[] = R"({"retry":true,"queue":"critical","class":"HardJob","args":[],"jid":"j1",)"
                     R"("error_message":"old","error_class":"OldError","failed_at":1700000100.25,)"
                     R"("retry_count":2,"extra":"kept"})";
  FailureInfo info;
  info.error_class = "NewError";
  info.error_message = "new";
  info.fetched_queue = "critical";
  info.now = 1700000200.0;
  auto out = RecordFailure(raw, info);
  REQUIRE(out.ok());
  CHECK(*out == R"({"retry":true,"queue":"critical","class":"HardJob","args":[],"jid":"j1",)"
                R"("error_message":"new","error_class":"NewError","failed_at":1700000100.25,)"
                R"("retry_count":3,"extra":"kept","retried_at":1700000200.0})");
}

TEST_CASE("RecordFailure sends the job to its retry_queue") {
  const char raw[] = R"({"class":"A","args":[],"queue":"default","retry_queue":"slow"})";
  FailureInfo info;
  info.error_class = "E";
  info.fetched_queue = "default";
  info.now = 1700000000;
  auto out = RecordFailure(raw, info);
  REQUIRE(out.ok());
  CHECK(out->find(R"("queue":"slow",)") != std::string::npos);
  // An empty retry_queue does not count.
  auto out2 = RecordFailure(R"({"class":"A","args":[],"queue":"x","retry_queue":""})", info);
  REQUIRE(out2.ok());
  CHECK(out2->find(R"("queue":"default",)") != std::string::npos);
}

TEST_CASE("RecordFailure keeps 10,000 characters of the message, cut between characters") {
  FailureInfo info;
  info.error_class = "E";
  info.fetched_queue = "q";
  info.now = 1700000000;
  auto message_of = [&](const std::string& message) {
    info.error_message = message;
    auto out = RecordFailure(R"({"class":"A","args":[]})", info);
    REQUIRE(out.ok());
    auto decoded = DecodeJob(*out);
    REQUIRE(decoded.ok());
    return std::string(decoded->document["error_message"].GetString());
  };
  // 9,999 ASCII characters and then two-byte ones: the 10,000th is kept
  // whole, the 10,001st is gone.
  std::string message = std::string(9999, 'a') + "éü";
  CHECK(message_of(message) == std::string(9999, 'a') + "é");
  // Three-byte characters only: 10,000 of them, 30,000 bytes.
  std::string wide;
  for (int i = 0; i < 10001; ++i) wide += "€";
  std::string kept = message_of(wide);
  CHECK(kept.size() == 30000);
  CHECK(kept.substr(kept.size() - 3) == "€");
  // Shorter messages are kept as they are.
  CHECK(message_of("short") == "short");
}

TEST_CASE("RecordFailure replaces invalid UTF-8 in the message by U+FFFD") {
  FailureInfo info;
  info.error_class = "E";
  info.fetched_queue = "q";
  info.now = 1700000000;
  info.error_message = std::string(
      "ab\xff\xfe"
      "cd\xe2\x82",
      8);
  auto out = RecordFailure(R"({"class":"A","args":[]})", info);
  REQUIRE(out.ok());
  CHECK(out->find("\"error_message\":\"ab\xEF\xBF\xBD\xEF\xBF\xBD"
                  "cd\xEF\xBF\xBD\"") != std::string::npos);
  // A replaced byte counts as one character towards the cut.
  info.error_message = std::string(10005, '\xff');
  out = RecordFailure(R"({"class":"A","args":[]})", info);
  REQUIRE(out.ok());
  auto decoded = DecodeJob(*out);
  REQUIRE(decoded.ok());
  CHECK(decoded->document["error_message"].GetStringLength() == 30000);
}

TEST_CASE("RecordFailure stores the backtrace the job asks for") {
  FailureInfo info;
  info.error_class = "E";
  info.fetched_queue = "q";
  info.now = 1700000000;
  for (int i = 0; i < 5; ++i) {
    info.backtrace.push_back("app/jobs/hard_job.rb:" + std::to_string(i) + ":in `perform'");
  }
  auto backtrace_of = [&](const std::string& raw) -> std::string {
    auto out = RecordFailure(raw, info);
    REQUIRE(out.ok());
    auto decoded = DecodeJob(*out);
    REQUIRE(decoded.ok());
    auto it = decoded->document.FindMember("error_backtrace");
    if (it == decoded->document.MemberEnd()) return "(none)";
    std::string encoded = it->value.GetString();
    // MIME base64: lines of 60 characters, each ended by a newline.
    size_t start = 0;
    while (start < encoded.size()) {
      size_t end = encoded.find('\n', start);
      REQUIRE(end != std::string::npos);
      if (end + 1 < encoded.size()) CHECK(end - start == 60);
      CHECK(end - start <= 60);
      start = end + 1;
    }
    return Inflate(Base64Decode(encoded));
  };
  std::string all = backtrace_of(R"({"class":"A","args":[],"backtrace":true})");
  CHECK(all == R"(["app/jobs/hard_job.rb:0:in `perform'","app/jobs/hard_job.rb:1:in `perform'",)"
               R"("app/jobs/hard_job.rb:2:in `perform'","app/jobs/hard_job.rb:3:in `perform'",)"
               R"("app/jobs/hard_job.rb:4:in `perform'"])");
  CHECK(backtrace_of(R"({"class":"A","args":[],"backtrace":2})") ==
        R"(["app/jobs/hard_job.rb:0:in `perform'","app/jobs/hard_job.rb:1:in `perform'"])");
  CHECK(backtrace_of(R"({"class":"A","args":[],"backtrace":false})") == "(none)");
  CHECK(backtrace_of(R"({"class":"A","args":[]})") == "(none)");
  // Replaced in place on a later failure.
  auto out = RecordFailure(
      R"({"class":"A","args":[],"backtrace":1,"error_backtrace":"old","retry_count":0,"x":1})",
      info);
  REQUIRE(out.ok());
  CHECK(out->find(R"("backtrace":1,"error_backtrace":"eJ)") != std::string::npos);
  // No backtrace known: nothing stored.
  info.backtrace.clear();
  CHECK(backtrace_of(R"({"class":"A","args":[],"backtrace":true})") == "(none)");
}

TEST_CASE("RecordFailure refuses payloads it cannot update") {
  FailureInfo info;
  info.error_class = "E";
  info.fetched_queue = "q";
  info.now = 1700000000;
  CHECK(RecordFailure("{", info).status().IsCorruption());
  CHECK(RecordFailure(R"({"class":"A"})", info).status().IsCorruption());
  CHECK(
      RecordFailure(R"({"class":"A","args":[],"retry_count":"2"})", info).status().IsCorruption());
  CHECK(
      RecordFailure(R"({"class":"A","args":[],"retry_count":1.5})", info).status().IsCorruption());
  // One more than the largest 64-bit count is no count reliableq can write
  // (it wrapped to -9223372036854775808, undefined behavior, before).
  auto top = RecordFailure(R"({"class":"A","args":[],"retry_count":9223372036854775807})", info);
  CHECK(top.status().IsCorruption());
  CHECK_MESSAGE(top.status().message().find("retry_count") != std::string::npos,
                top.status().message());
  auto below = RecordFailure(R"({"class":"A","args":[],"retry_count":9223372036854775806})", info);
  REQUIRE(below.ok());
  CHECK(below->find(R"("retry_count":9223372036854775807,)") != std::string::npos);
  // null means "no count yet", as in Ruby.
  auto out = RecordFailure(R"({"class":"A","args":[],"retry_count":null})", info);
  REQUIRE(out.ok());
  CHECK(out->find(R"("retry_count":0,)") != std::string::npos);
  CHECK(out->find(R"("failed_at":1700000000.0)") != std::string::npos);
}

// ---------------------------------------------------------------------------
// Integers beyond 64 bits: Ruby reads and writes them as Integers, a DOM
// only as doubles.

FailureInfo SomeFailure() {
  FailureInfo info;
  info.error_class = "E";
  info.error_message = "m";
  info.fetched_queue = "q";
  info.now = 1700000000.5;
  return info;
}

TEST_CASE("EncodeJob keeps integers beyond 64 bits in args and extra byte for byte") {
  Job job = MakeJob(R"([18446744073709551616, -9223372036854775809,
                        123456789012345678901234567890, [-36893488147419103232],
                        {"n": 18446744073709551616}, 18446744073709551615, -0, 1.5, 1e2])",
                    R"({"big": 99999999999999999999, "nested": {"l": [-99999999999999999999]}})");
  auto json = EncodeJob(job, 1700000000.5, 1700000000.5);
  REQUIRE(json.ok());
  CHECK(*json == R"({"class":"HardJob","args":[18446744073709551616,-9223372036854775809,)"
                 R"(123456789012345678901234567890,[-36893488147419103232],)"
                 R"({"n":18446744073709551616},18446744073709551615,0,1.5,100.0],)"
                 R"("queue":"default","retry":true,"jid":"0123456789abcdef01234567",)"
                 R"("created_at":1700000000.5,"enqueued_at":1700000000.5,)"
                 R"("big":99999999999999999999,"nested":{"l":[-99999999999999999999]}})");
  // Still a job reliableq reads; its handlers see the nearest doubles.
  auto decoded = DecodeJob(*json);
  REQUIRE(decoded.ok());
  CHECK(decoded->document["args"][0].GetDouble() == 18446744073709551616.0);
}

TEST_CASE("EncodeJob writes every other value as the DOM writer does") {
  const char* values[] = {
      "1.0", "1e2", "1e15", "1e16", "1.5e16", "0.0001", "0.00001", "1.25e-5", "5e-324", "-0.0",
      "0.0", "123456.789", "-1.5e300", "0.30000000000000004", "1700000000.1234567", "1E-7",
      "2.5e+300", "1.7976931348623157e308", "1e-400", "0", "-1", "2147483648", "-2147483649",
      "9223372036854775807", "-9223372036854775808", "18446744073709551615", "null", "true",
      "false", R"("a\/b \u00e9 \ud83d\ude00 \"q\" \\ \u0001\n")", "{}", "[]",
      R"({"k\"ey": [1, {"x": null}], "k\"ey2": 2})"};
  for (const char* value : values) {
    std::string args = std::string("[ ") + value + " ]";
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseFullPrecisionFlag>(args.c_str());
    REQUIRE_MESSAGE(!doc.HasParseError(), value);
    auto json = EncodeJob(MakeJob(args), 1, std::nullopt);
    REQUIRE_MESSAGE(json.ok(), value);
    CHECK_MESSAGE(json->find("\"args\":" + ToJson(doc) + ",") != std::string::npos, value);
  }
}

TEST_CASE("EncodeJob still refuses JSON a DOM refuses, with the same reason") {
  for (const char* args : {"[1e400]", "[1,]", "[01]", "[-]", "[1.]", "[\"\xff\"]", "[1] x"}) {
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseValidateEncodingFlag>(args);
    REQUIRE(doc.HasParseError());
    auto json = EncodeJob(MakeJob(args), 1, 1);
    CHECK_MESSAGE(json.status().IsInvalidArgument(), args);
    CHECK_MESSAGE(json.status().message().find(
                      "at offset " + std::to_string(doc.GetErrorOffset())) != std::string::npos,
                  args << ": " << json.status().message());
  }
}

TEST_CASE("EncodeJob enforces the depth limit on args and each extra field") {
  // args: the job object and 99 arrays.
  CHECK(EncodeJob(MakeJob(std::string(99, '[') + std::string(99, ']')), 1, 1).ok());
  auto deep = EncodeJob(MakeJob(std::string(100, '[') + std::string(100, ']')), 1, 1);
  CHECK(deep.status().IsInvalidArgument());
  CHECK(deep.status().message().find("nest deeper") != std::string::npos);
  // Far too deep for a recursive parser: refused, not a crash.
  CHECK(EncodeJob(MakeJob(std::string(200000, '[') + std::string(200000, ']')), 1, 1)
            .status()
            .IsInvalidArgument());
  // An extra field stands at the args' level.
  std::string ok = R"({"a":1,"b":)" + std::string(99, '[') + std::string(99, ']') + "}";
  CHECK(EncodeJob(MakeJob("[]", ok), 1, 1).ok());
  std::string too_deep = R"({"a":[[1]],"b":)" + std::string(100, '[') + std::string(100, ']') +
                         R"(,"c":1})";
  auto refused = EncodeJob(MakeJob("[]", too_deep), 1, 1);
  CHECK(refused.status().IsInvalidArgument());
  CHECK_MESSAGE(refused.status().message().find("\"b\"") != std::string::npos,
                refused.status().message());
  // A reserved name before the deep field is the reason given.
  std::string both = R"({"jid":"x","b":)" + std::string(100, '[') + std::string(100, ']') + "}";
  auto reserved = EncodeJob(MakeJob("[]", both), 1, 1);
  CHECK_MESSAGE(reserved.status().message().find("\"jid\"") != std::string::npos,
                reserved.status().message());
}

TEST_CASE("RecordFailure keeps integers beyond 64 bits wherever they stand") {
  const char raw[] =
      R"({"class":"A","args":[18446744073709551616,"x",[-36893488147419103232,)"
      R"({"n":123456789012345678901234567890}],-0,1.5,1e2,-0.0],"queue":"default",)"
      R"("retry":true,"jid":"j1","created_at":1700000000.5,"big":-9223372036854775809,)"
      R"("tags":{"id":18446744073709551617}})";
  auto out = RecordFailure(raw, SomeFailure());
  REQUIRE(out.ok());
  CHECK(*out == R"({"class":"A","args":[18446744073709551616,"x",[-36893488147419103232,)"
                R"({"n":123456789012345678901234567890}],0,1.5,100.0,-0.0],"queue":"q",)"
                R"("retry":true,"jid":"j1","created_at":1700000000.5,"big":-9223372036854775809,)"
                R"("tags":{"id":18446744073709551617},"error_message":"m","error_class":"E",)"
                R"("failed_at":1700000000.5,"retry_count":0})");
  // A second failure changes only the bookkeeping.
  auto again = RecordFailure(*out, SomeFailure());
  REQUIRE(again.ok());
  CHECK(again->find(R"("args":[18446744073709551616,"x",[-36893488147419103232,)"
                    R"({"n":123456789012345678901234567890}],0,1.5,100.0,-0.0],)") !=
        std::string::npos);
  CHECK(again->find(R"("tags":{"id":18446744073709551617},"error_message":"m",)"
                    R"("error_class":"E","failed_at":1700000000.5,"retry_count":1,)"
                    R"("retried_at":1700000000.5})") != std::string::npos);
}

TEST_CASE("RecordFailure replaces a field of any shape in place and writes the rest as a DOM") {
  // Replaced values that are containers are dropped whole; a field set
  // that stands twice is written once, where it first stands (as Ruby's
  // parse and generate would).
  const char raw[] =
      R"( { "class" : "A", "args" : [ 1 , 2.50 , "\u00e9\/" ], "queue" : ["x", {"y": [1]}],)"
      R"( "error_message" : {"old": [[]]}, "k\"\\" : {}, "queue" : "dup",)"
      R"( "retry_count" : null, "z" : [] } )";
  auto out = RecordFailure(raw, SomeFailure());
  REQUIRE(out.ok());
  CHECK(*out == R"({"class":"A","args":[1,2.5,"é/"],"queue":"q","error_message":"m",)"
                R"("k\"\\":{},"retry_count":0,"z":[],"error_class":"E",)"
                R"("failed_at":1700000000.5})");
  // The same bytes a DOM would give for the fields left alone.
  auto decoded = DecodeJob(kRubyPayload);
  REQUIRE(decoded.ok());
  auto failed = RecordFailure(kRubyPayload, SomeFailure());
  REQUIRE(failed.ok());
  auto refailed = DecodeJob(*failed);
  REQUIRE(refailed.ok());
  for (const char* field : {"args", "created_at", "enqueued_at", "tags", "error_backtrace"}) {
    CHECK_MESSAGE(ToJson(refailed->document[field]) == ToJson(decoded->document[field]), field);
  }
  // Bytes that are not UTF-8 in a stored payload pass through, as before.
  std::string odd = "{\"class\":\"A\",\"args\":[\"\xff\"]}";
  auto kept = RecordFailure(odd, SomeFailure());
  REQUIRE(kept.ok());
  CHECK(kept->find("\"args\":[\"\xff\"]") != std::string::npos);
}

TEST_CASE("RecordFailure still enforces the depth limit") {
  std::string deep = R"({"class":"A","args":[],"x":)" + std::string(100, '[') +
                     std::string(100, ']') + "}";
  CHECK(RecordFailure(deep, SomeFailure()).status().IsCorruption());
  std::string ok = R"({"class":"A","args":[],"x":)" + std::string(99, '[') +
                   std::string(99, ']') + "}";
  auto out = RecordFailure(ok, SomeFailure());
  REQUIRE(out.ok());
  CHECK(out->find(std::string(99, '[') + std::string(99, ']')) != std::string::npos);
}

TEST_CASE("integers beyond 64 bits survive a DOM that code changes (client middleware)") {
  Job job = MakeJob(R"([18446744073709551616, 18446744073709551617, [-99999999999999999999], 7])",
                    R"({"big": 123456789012345678901234567890, "gone": 1})");
  auto json = EncodeJob(job, 1700000000.5, 1700000000.5);
  REQUIRE(json.ok());
  WideIntegers wide = WideIntegers::Find(*json);
  CHECK(!wide.empty());
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseFullPrecisionFlag>(json->c_str());
  REQUIRE(!doc.HasParseError());
  // Unchanged: the same bytes.
  CHECK(ToJson(doc, wide) == *json);
  // What a middleware may do: add and remove fields, change an argument.
  auto& allocator = doc.GetAllocator();
  doc.AddMember("trace", rapidjson::Value("t1"), allocator);
  doc.RemoveMember("gone");
  doc["args"][3].SetInt(8);
  std::string changed = ToJson(doc, wide);
  CHECK(changed == R"({"class":"HardJob","args":[18446744073709551616,18446744073709551617,)"
                   R"([-99999999999999999999],8],"queue":"default","retry":true,)"
                   R"("jid":"0123456789abcdef01234567","created_at":1700000000.5,)"
                   R"("enqueued_at":1700000000.5,"big":123456789012345678901234567890,)"
                   R"("trace":"t1"})");
  // A value a middleware puts in a big integer's place is written as it is.
  doc["args"][0].SetDouble(0.5);
  doc["big"].SetDouble(1e30);
  changed = ToJson(doc, wide);
  CHECK(changed.find(R"("args":[0.5,18446744073709551617,)") != std::string::npos);
  CHECK(changed.find(R"("big":1.0e+30,)") != std::string::npos);
  // Without the literals, the DOM's doubles.
  CHECK(ToJson(doc).find("18446744073709551617") == std::string::npos);
  CHECK(WideIntegers::Find("[1, 2.5, 18446744073709551615]").empty());
  CHECK(WideIntegers::Find("[18446744073709551616").empty());
}

TEST_CASE("RecordFailure updates a job with duplicate names as Sidekiq would") {
  const char raw[] = R"({"class":"A","args":[],"queue":"x","retry_count":1,"tags":["a"],)"
                     R"("retry_count":5,"tags":["b"],"queue":"y"})";
  auto out = RecordFailure(raw, SomeFailure());
  REQUIRE(out.ok());
  // Ruby: JSON.parse, Sidekiq's retry bookkeeping, JSON.generate.
  CHECK(*out == R"({"class":"A","args":[],"queue":"q","retry_count":6,"tags":["b"],)"
                R"("error_message":"m","error_class":"E","retried_at":1700000000.5})");
  // Nested objects too; wide integers keep their digits wherever they end up.
  const char nested[] = R"({"class":"A","args":[{"k":1,"k":18446744073709551617}],)"
                        R"("x":{"a":[1],"b":2,"a":18446744073709551616},"y":{"c":3},)"
                        R"("y":{"c":4,"c":5}})";
  out = RecordFailure(nested, SomeFailure());
  REQUIRE(out.ok());
  CHECK(*out == R"({"class":"A","args":[{"k":18446744073709551617}],)"
                R"("x":{"a":18446744073709551616,"b":2},"y":{"c":5},)"
                R"("queue":"q","error_message":"m","error_class":"E",)"
                R"("failed_at":1700000000.5,"retry_count":0})");
}

// Found by tests/fuzz: RapidJSON 1.1.0's own conversion (its DiyFp path
// passes 0 to clz) read a zero written with 23 or more decimals as a tiny
// nonzero number, and the codec wrote that number back.
TEST_CASE("numbers read as Ruby reads them, zeros with many decimals included") {
  const std::string zeros(23, '0');
  const std::string raw = R"({"class":"A","args":[0.)" + zeros + ",-0." + zeros +
                          "0000000e5,0." + std::string(40, '0') +
                          R"(1,2.4e-324,1e-400,4.9e-324,1700000000.1234567,)"
                          R"(1.7976931348623157e308,0.1e1,123456789012345678901234567890]})";
  auto decoded = DecodeJob(raw);
  REQUIRE(decoded.ok());
  const rapidjson::Value& args = decoded->document["args"];
  CHECK(args[0].GetDouble() == 0.0);
  CHECK(args[1].GetDouble() == 0.0);
  CHECK(std::signbit(args[1].GetDouble()));
  // Ruby: JSON.generate(JSON.parse(raw)["args"][0..9])
  const char expected[] = "[0.0,-0.0,1.0e-41,0.0,0.0,5.0e-324,1700000000.1234567,"
                          "1.7976931348623157e+308,1.0,1.2345678901234568e+29]";
  CHECK(ToJson(args) == expected);
  auto failed = RecordFailure(raw, SomeFailure());
  REQUIRE(failed.ok());
  CHECK(failed->find(R"("args":[0.0,-0.0,1.0e-41,0.0,0.0,5.0e-324,1700000000.1234567,)"
                     R"(1.7976931348623157e+308,1.0,123456789012345678901234567890],)") !=
        std::string::npos);
  auto encoded = EncodeJob(MakeJob(R"([0.)" + zeros + "]"), 1, 1);
  REQUIRE(encoded.ok());
  CHECK(encoded->find(R"("args":[0.0],)") != std::string::npos);
  // Beyond the double range: refused, with the number's offset.
  auto too_big = DecodeJob(R"({"class":"A","args":[1.7976931348623159e308]})");
  CHECK(too_big.status().IsCorruption());
  CHECK_MESSAGE(too_big.status().message().find("at offset 21") != std::string::npos,
                too_big.status().message());
}

// Found by tests/fuzz: a \u escape of a lone low surrogate (which RapidJSON,
// like Ruby, reads as the three bytes of an encoded surrogate, no UTF-8)
// was written as those bytes, so that a payload of plain ASCII came back
// as invalid UTF-8.
TEST_CASE("a lone surrogate read from an escape is written as that escape") {
  const char raw[] = R"({"class":"A","args":["a\udc00b","\uDFFF",["\ud83d\ude00"]],"k\udc00":1})";
  auto decoded = DecodeJob(raw);
  REQUIRE(decoded.ok());
  CHECK(decoded->document["args"][0].GetStringLength() == 5);  // a, 3 bytes, b
  const char expected[] = R"({"class":"A","args":["a\udc00b","\udfff",["😀"]],"k\udc00":1})";
  CHECK(ToJson(decoded->document) == expected);
  auto failed = RecordFailure(raw, SomeFailure());
  REQUIRE(failed.ok());
  CHECK(failed->find(R"("args":["a\udc00b","\udfff",["😀"]],"k\udc00":1,)") !=
        std::string::npos);
  // The same bytes raw in a stored payload (not UTF-8): the same string for
  // Ruby, now written as UTF-8.
  auto bytes = DecodeJob("{\"class\":\"A\",\"args\":[\"\xED\xB0\x80\"]}");
  REQUIRE(bytes.ok());
  CHECK(ToJson(bytes->document) == R"({"class":"A","args":["\udc00"]})");
  // A client may not send one: Sidekiq's JSON.generate refuses the string.
  auto args = EncodeJob(MakeJob(R"(["\udc00"])"), 1, 1);
  CHECK(args.status().IsInvalidArgument());
  CHECK_MESSAGE(args.status().message().find("surrogate") != std::string::npos,
                args.status().message());
  CHECK(EncodeJob(MakeJob("[]", R"({"x":{"\udfff":1}})"), 1, 1).status().IsInvalidArgument());
  CHECK(EncodeJob(MakeJob(R"(["\ud83d\ude00"])"), 1, 1).ok());
}

}  // namespace
}  // namespace reliableq

TEST_CASE("one queue name limit: 1 to 1,000 bytes of UTF-8, wherever a name enters") {
  CHECK(reliableq::CheckQueueName("default").ok());
  CHECK(reliableq::CheckQueueName("card:*").ok());
  CHECK(reliableq::CheckQueueName(std::string(reliableq::kMaxQueueNameBytes, 'q')).ok());
  for (const std::string& bad :
       {std::string(), std::string(reliableq::kMaxQueueNameBytes + 1, 'q'),
        std::string(120 * 1024, 'q'), std::string("bad\xff")}) {
    reliableq::Status status = reliableq::CheckQueueName(bad);
    CHECK(status.code() == reliableq::Status::Code::kInvalidArgument);
    CHECK(status.message().size() < 100);  // the name is not quoted
  }
  // The client's encoding refuses what no worker serves.
  reliableq::Job job;
  job.job_class = "A";
  job.queue = std::string(120 * 1024, 'q');
  CHECK_FALSE(reliableq::EncodeJob(job, 1700000000, 1700000000).ok());
}

TEST_CASE("CheckJob applies the client's rules without connecting") {
  reliableq::Job job;
  job.job_class = "A";
  CHECK(reliableq::CheckJob(job).ok());
  job.jid = "bad\x01jid";
  CHECK(reliableq::CheckJob(job).IsInvalidArgument());
  job.jid.clear();
  job.extra = R"({"jid":"x"})";
  CHECK(reliableq::CheckJob(job).IsInvalidArgument());
  job.extra = R"({"unique_key":"x"})";
  CHECK(reliableq::CheckJob(job).IsInvalidArgument());
  job.extra = "{}";
  job.unique = reliableq::Uniqueness{.key = "has\"quote"};
  CHECK(reliableq::CheckJob(job).IsInvalidArgument());
  job.unique = reliableq::Uniqueness{};
  job.expires_in = 60;
  CHECK(reliableq::CheckJob(job).ok());
  job.queue = std::string(120 * 1024, 'q');
  CHECK(reliableq::CheckJob(job).message().find("longer than 1000 bytes") != std::string::npos);
}

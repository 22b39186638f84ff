// Limits: parsing `--limit NAME=SPEC`, the checks of ServerOptions::limits,
// and which limiter a fetched job falls under (LimitPlan). Pure.

#include "reliableq/limits.h"

#include <doctest/doctest.h>

#include "protocol/script_calls.h"
#include "server/limit_gate.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::server;
using std::chrono::milliseconds;

TEST_CASE("a limit spec parses concurrency, rate and classes") {
  Result<Limit> both = ParseLimit("mail=concurrency=3,rate=10/1s,classes=Mailer,Digest");
  REQUIRE(both.ok());
  CHECK(both->name == "mail");
  CHECK(both->concurrency == 3);
  CHECK(both->rate == 10);
  CHECK(both->period == milliseconds(1000));
  CHECK(both->classes == std::vector<std::string>{"Mailer", "Digest"});

  Result<Limit> alone = ParseLimit("HardJob=concurrency=2");
  REQUIRE(alone.ok());
  CHECK(alone->rate == 0);
  CHECK(alone->EffectiveClasses() == std::vector<std::string>{"HardJob"});

  Result<Limit> rate = ParseLimit("api=rate=100/5m");
  REQUIRE(rate.ok());
  CHECK(rate->period == milliseconds(300000));
  CHECK(rate->concurrency == 0);
  CHECK(ParseLimit("api=rate=1/250ms")->period == milliseconds(250));
  CHECK(ParseLimit("api=rate=1/2h")->period == milliseconds(7200000));
}

TEST_CASE("a bad limit spec is refused with a one-line reason") {
  for (const char* bad : {"mail",
                          "=concurrency=1",
                          "mail=",
                          "mail=classes=A",
                          "mail=concurrency=0",
                          "mail=concurrency=-1",
                          "mail=concurrency=x",
                          "mail=concurrency=1,concurrency=2",
                          "mail=rate=10",
                          "mail=rate=10/1",
                          "mail=rate=10/0s",
                          "mail=rate=0/1s",
                          "mail=rate=10/1d",
                          "mail=rate=10/1000h",
                          "mail=speed=3",
                          "mail=concurrency=1,",
                          "mail=concurrency=1,Mailer",
                          "ma il=concurrency=1",
                          "mail=concurrency=1,classes=A B",
                          "mail=concurrency=1,classes=A,classes=B",
                          "mail=concurrency=10000000"}) {
    CAPTURE(bad);
    Result<Limit> limit = ParseLimit(bad);
    REQUIRE_FALSE(limit.ok());
    CHECK(limit.status().IsInvalidArgument());
    CHECK(limit.status().message().find('\n') == std::string::npos);
  }
}

TEST_CASE("limits must have distinct names and classes") {
  std::vector<Limit> limits{*ParseLimit("a=concurrency=1"), *ParseLimit("b=rate=1/1s")};
  CHECK(CheckLimits(limits).ok());
  limits.push_back(*ParseLimit("a=concurrency=2,classes=Other"));
  CHECK_FALSE(CheckLimits(limits).ok());
  limits.back() = *ParseLimit("c=concurrency=2,classes=a");
  CHECK_FALSE(CheckLimits(limits).ok());
  limits.back() = Limit{"d", {}, 0, 0, milliseconds(0)};
  CHECK_FALSE(CheckLimits(limits).ok());
  limits.back() = Limit{"d", {}, 0, 5, milliseconds(0)};
  CHECK_FALSE(CheckLimits(limits).ok());
  limits.back() = Limit{"d", {}, 0, 5, milliseconds(10)};
  CHECK(CheckLimits(limits).ok());
}

TEST_CASE("a limit's definition is JSON with its classes and terms") {
  CHECK(LimitDefinitionJson(*ParseLimit("mail=concurrency=3,rate=10/500ms,classes=M")) ==
        R"({"name":"mail","classes":["M"],"concurrency":3,"rate":10,"period":0.5})");
}

constexpr double kNow = 1700000100.25;

TEST_CASE("the plan limits a job by its class, from the queue its payload names") {
  LimitPlan plan(
      {*ParseLimit("mail=concurrency=3,classes=Mailer,Digest"), *ParseLimit("HardJob=rate=1/1s")});
  bool mismatch = true;
  CHECK(plan.Find(R"({"class":"Digest","queue":"q","args":[]})", "q", kNow, &mismatch) == 0u);
  CHECK_FALSE(mismatch);
  CHECK(plan.Find(R"({"class":"HardJob","queue":"q"})", "q", kNow, &mismatch) == 1u);
  CHECK(plan.Find(R"({"class":"Other","queue":"q"})", "q", kNow, &mismatch) == std::nullopt);
  CHECK(plan.Find("not json", "q", kNow, &mismatch) == std::nullopt);
  CHECK(plan.Find(R"({"class":1})", "q", kNow, &mismatch) == std::nullopt);
  CHECK_FALSE(mismatch);
  // Parked, it would go back to the queue its payload names.
  CHECK(plan.Find(R"({"class":"Mailer","queue":"other"})", "q", kNow, &mismatch) == std::nullopt);
  CHECK(mismatch);
  CHECK(plan.Find(R"({"class":"Mailer"})", "q", kNow, &mismatch) == std::nullopt);
  CHECK(mismatch);
  // The scripts read the queue as written: an escaped name is not taken.
  CHECK(plan.Find(R"({"class":"Mailer","queue":"\u0071"})", "q", kNow, &mismatch) == std::nullopt);
  CHECK(mismatch);
  // An expired job takes no slot: it is discarded unrun.
  CHECK(plan.Find(R"({"class":"Mailer","queue":"q","expires_at":1700000000.5})", "q", kNow,
                  &mismatch) == std::nullopt);
  CHECK_FALSE(mismatch);
  CHECK(plan.Find(R"({"class":"Mailer","queue":"q","expires_at":1700009999.5})", "q", kNow,
                  &mismatch) == 0u);
}

TEST_CASE("a holder names its process after the first @") {
  CHECK(LimitHolder(42, "host:1:abc@x") == "42@host:1:abc@x");
}

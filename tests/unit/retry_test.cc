#include "protocol/retry.h"

#include <doctest/doctest.h>

#include <limits>
#include <string>

using namespace reliableq;
using namespace reliableq::protocol;

namespace {

rapidjson::Document Job(const char* json) {
  rapidjson::Document doc;
  doc.Parse(json);
  REQUIRE_FALSE(doc.HasParseError());
  return doc;
}

// A random source that always answers `value` (clamped below n).
RandomBelow Fixed(int value) {
  return [value](int n) { return value < n ? value : n - 1; };
}

constexpr double kNow = 1700000000.0;

}  // namespace

TEST_CASE("the default delay is Sidekiq's count^4 + 15 + rand(10) * (count + 1)") {
  CHECK(DefaultRetryDelay(0, Fixed(0)) == 15);
  CHECK(DefaultRetryDelay(0, Fixed(9)) == 24);
  CHECK(DefaultRetryDelay(1, Fixed(0)) == 16);
  CHECK(DefaultRetryDelay(3, Fixed(0)) == 96);
  CHECK(DefaultRetryDelay(3, Fixed(5)) == 96 + 5 * 4);
  CHECK(DefaultRetryDelay(24, Fixed(0)) == 331791);
  // 25 retries add up to about 20.4 days before jitter (data contract 3.3).
  double total = 0;
  for (int c = 0; c < 25; ++c) total += DefaultRetryDelay(c, Fixed(0));
  CHECK(total == 1763395);
  // The random source is asked for a number below 10.
  int asked = 0;
  DefaultRetryDelay(2, [&asked](int n) {
    asked = n;
    return 0;
  });
  CHECK(asked == 10);
}

TEST_CASE("retry true retries up to max_retries, then the job is dead") {
  auto first = PlanFailure(Job(R"({"class":"A","args":[],"retry":true})"), 25, kNow, std::nullopt,
                           {}, Fixed(0));
  CHECK(first.action == FailureAction::kRetry);
  CHECK(first.count == 0);
  CHECK(first.retry_at == kNow + 15);
  CHECK_FALSE(first.exhausted);

  auto later = PlanFailure(Job(R"({"class":"A","args":[],"retry":true,"retry_count":3})"), 25, kNow,
                           std::nullopt, {}, Fixed(2));
  CHECK(later.action == FailureAction::kRetry);
  CHECK(later.count == 4);
  CHECK(later.retry_at == kNow + 256 + 15 + 2 * 5);

  auto last = PlanFailure(Job(R"({"class":"A","args":[],"retry":true,"retry_count":24})"), 25, kNow,
                          std::nullopt, {}, Fixed(0));
  CHECK(last.action == FailureAction::kDead);
  CHECK(last.count == 25);
  CHECK(last.exhausted);
  CHECK(last.death);

  // A missing `retry` is Sidekiq's default, true.
  CHECK(
      PlanFailure(Job(R"({"class":"A","args":[]})"), 25, kNow, std::nullopt, {}, Fixed(0)).action ==
      FailureAction::kRetry);
  // max_retries comes from the server.
  CHECK(PlanFailure(Job(R"({"class":"A","args":[],"retry_count":1})"), 2, kNow, std::nullopt, {},
                    Fixed(0))
            .action == FailureAction::kDead);
}

TEST_CASE("a retry_count at or beyond the int range is exhausted, never overflows") {
  for (const char* count : {"2147483646", "2147483647", "9223372036854775806",
                            "9223372036854775807"}) {
    CAPTURE(count);
    std::string json = std::string(R"({"class":"A","args":[],"retry_count":)") + count + "}";
    auto plan = PlanFailure(Job(json.c_str()), 25, kNow, std::nullopt, {}, Fixed(0));
    CHECK(plan.count == std::numeric_limits<int>::max());
    CHECK(plan.action == FailureAction::kDead);
  }
  // An integral float counts as its integer, as RecordFailure reads it.
  auto plan = PlanFailure(Job(R"({"class":"A","args":[],"retry_count":3.0})"), 25, kNow,
                          std::nullopt, {}, Fixed(0));
  CHECK(plan.count == 4);
}

TEST_CASE("retry N allows N retries; 0 sends the first failure to the dead set") {
  auto zero = PlanFailure(Job(R"({"class":"A","args":[],"retry":0})"), 25, kNow, std::nullopt, {},
                          Fixed(0));
  CHECK(zero.action == FailureAction::kDead);
  CHECK(zero.exhausted);
  auto two_first = PlanFailure(Job(R"({"class":"A","args":[],"retry":2})"), 25, kNow, std::nullopt,
                               {}, Fixed(0));
  CHECK(two_first.action == FailureAction::kRetry);
  auto two_second = PlanFailure(Job(R"({"class":"A","args":[],"retry":2,"retry_count":0})"), 25,
                                kNow, std::nullopt, {}, Fixed(0));
  CHECK(two_second.action == FailureAction::kRetry);
  auto two_third = PlanFailure(Job(R"({"class":"A","args":[],"retry":2,"retry_count":1})"), 25,
                               kNow, std::nullopt, {}, Fixed(0));
  CHECK(two_third.action == FailureAction::kDead);
}

TEST_CASE("retry false drops the job and runs the death handlers") {
  auto plan = PlanFailure(Job(R"({"class":"A","args":[],"retry":false})"), 25, kNow, std::nullopt,
                          {}, Fixed(0));
  CHECK(plan.action == FailureAction::kDrop);
  CHECK(plan.death);
  CHECK_FALSE(plan.exhausted);
}

TEST_CASE("dead false keeps an exhausted job out of the dead set") {
  auto plan = PlanFailure(Job(R"({"class":"A","args":[],"retry":0,"dead":false})"), 25, kNow,
                          std::nullopt, {}, Fixed(0));
  CHECK(plan.action == FailureAction::kDrop);
  CHECK(plan.exhausted);
  CHECK(plan.death);
}

TEST_CASE("retry_for ends retries by time, not count") {
  auto young = PlanFailure(
      Job(R"({"class":"A","args":[],"retry_for":3600,"retry_count":40,"failed_at":1699999000.0})"),
      25, kNow, std::nullopt, {}, Fixed(0));
  CHECK(young.action == FailureAction::kRetry);
  auto old = PlanFailure(
      Job(R"({"class":"A","args":[],"retry_for":60,"retry_count":0,"failed_at":1699999000.0})"), 25,
      kNow, std::nullopt, {}, Fixed(0));
  CHECK(old.action == FailureAction::kDead);
  CHECK(old.exhausted);
  // Sidekiq 8's failed_at is integer milliseconds.
  auto young_ms = PlanFailure(
      Job(R"({"class":"A","args":[],"retry_for":3600,"retry_count":1,"failed_at":1699999000000})"),
      25, kNow, std::nullopt, {}, Fixed(0));
  CHECK(young_ms.action == FailureAction::kRetry);
  auto old_ms = PlanFailure(
      Job(R"({"class":"A","args":[],"retry_for":60,"retry_count":1,"failed_at":1699999000000})"),
      25, kNow, std::nullopt, {}, Fixed(0));
  CHECK(old_ms.action == FailureAction::kDead);
}

TEST_CASE("a class's retry_in can set the delay, discard or kill") {
  auto custom = PlanFailure(
      Job(R"({"class":"A","args":[],"retry_count":1})"), 25, kNow, std::nullopt,
      [](int count) {
        CHECK(count == 2);
        return RetryIn::After(100);
      },
      Fixed(3));
  CHECK(custom.action == FailureAction::kRetry);
  CHECK(custom.retry_at == kNow + 100 + 3 * 3);
  auto discard = PlanFailure(
      Job(R"({"class":"A","args":[]})"), 25, kNow, std::nullopt,
      [](int) { return RetryIn::Discard(); }, Fixed(0));
  CHECK(discard.action == FailureAction::kDrop);
  // As Sidekiq 8: discarded_at, and the death handlers run.
  CHECK(discard.death);
  CHECK(discard.discarded);
  CHECK_FALSE(discard.exhausted);
  auto kill = PlanFailure(
      Job(R"({"class":"A","args":[]})"), 25, kNow, std::nullopt,
      [](int) { return RetryIn::Kill(); }, Fixed(0));
  CHECK(kill.action == FailureAction::kDead);
  CHECK(kill.exhausted);  // the hook and death handlers run, as in Sidekiq 7
  CHECK(kill.death);
  auto kept_alive = PlanFailure(
      Job(R"({"class":"A","args":[],"dead":false})"), 25, kNow, std::nullopt,
      [](int) { return RetryIn::Kill(); }, Fixed(0));
  CHECK(kept_alive.action == FailureAction::kDrop);
  CHECK(kept_alive.discarded);
  // A non-positive delay falls back to the default schedule.
  auto zero = PlanFailure(
      Job(R"({"class":"A","args":[]})"), 25, kNow, std::nullopt,
      [](int) { return RetryIn::After(0); }, Fixed(0));
  CHECK(zero.retry_at == kNow + 15);
  // retry_in is not asked once the retries are used up.
  bool asked = false;
  PlanFailure(
      Job(R"({"class":"A","args":[],"retry":0})"), 25, kNow, std::nullopt,
      [&asked](int) {
        asked = true;
        return RetryIn::Default();
      },
      Fixed(0));
  CHECK_FALSE(asked);
}

TEST_CASE(
    "a failure's own outcome wins over its class's retry_in, and a discard or kill over "
    "used-up retries") {
  auto never_asked = [](int) -> RetryIn {
    FAIL("retry_in must not be asked");
    return RetryIn::Default();
  };
  auto retry = PlanFailure(Job(R"({"class":"A","args":[],"retry_count":1})"), 25, kNow,
                           RetryIn::After(300), never_asked, Fixed(2));
  CHECK(retry.action == FailureAction::kRetry);
  CHECK(retry.retry_at == kNow + 300 + 2 * 3);
  // Retries used up: JobRetry's delay does not prolong them.
  auto spent = PlanFailure(Job(R"({"class":"A","args":[],"retry":2,"retry_count":1})"), 25, kNow,
                           RetryIn::After(300), never_asked, Fixed(0));
  CHECK(spent.action == FailureAction::kDead);
  CHECK(spent.exhausted);
  for (const char* job : {R"({"class":"A","args":[]})", R"({"class":"A","args":[],"retry":0})"}) {
    auto discard = PlanFailure(Job(job), 25, kNow, RetryIn::Discard(), never_asked, Fixed(0));
    CHECK(discard.action == FailureAction::kDrop);
    CHECK(discard.discarded);
    CHECK(discard.death);
    CHECK_FALSE(discard.exhausted);
    auto dead = PlanFailure(Job(job), 25, kNow, RetryIn::Kill(), never_asked, Fixed(0));
    CHECK(dead.action == FailureAction::kDead);
    CHECK(dead.exhausted);
    CHECK(dead.death);
  }
  // retry false still turns every retry and the dead set off.
  auto off = PlanFailure(Job(R"({"class":"A","args":[],"retry":false})"), 25, kNow, RetryIn::Kill(),
                         never_asked, Fixed(0));
  CHECK(off.action == FailureAction::kDrop);
}

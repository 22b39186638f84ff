# Counts the checks of the interop scripts (jobs_compare.rb,
# sidekiq_api_check.rb, and through process_api_helper.rb
# process_api_check.rb and process_api_sets.rb). A failed check is recorded
# and the script goes on, so that one run names every difference rather than
# only the first.
#
# The C++ tests read the report (RunRubyChecks in interop_util.h): on
# success "<label>: N checks passed" on stdout and exit 0; otherwise each
# failed check on stderr as "FAILED: ...", then how many failed, and exit 1.

module Checks
  @count = 0
  @failures = []

  # Counts one check, described by `what`, that passes when `ok` is truthy.
  # Returns `ok`, so that a caller can skip what depends on it.
  def self.check(what, ok)
    @count += 1
    @failures << what unless ok
    ok
  end

  # Reports every check so far under `label` and exits.
  def self.finish(label)
    if @failures.empty?
      puts "#{label}: #{@count} checks passed"
      exit 0
    end
    @failures.each { |failure| warn "FAILED: #{failure}" }
    warn "#{label}: #{@failures.size} of #{@count} checks failed"
    exit 1
  end
end

# The scripts call it bare, at top level and in their own methods.
def check(what, ok)
  Checks.check(what, ok)
end

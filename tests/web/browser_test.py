#!/usr/bin/env python3
"""The `reliableq web` dashboard in a real browser (headless Chromium).

Starts a private redis-server and `reliableq web` on free loopback ports,
seeds a queue, retry, scheduled and dead entries, a Sidekiq-style live
process and a dead process's working list, then loads every page of the
dashboard, checks that it shows the seeded data, saves a screenshot of each
(1280x900) into $SCREENSHOT_DIR (default build/screenshots/), and uses the
page's buttons: the live chart's rates while counters move, the pause
toggle, Quiet (the process gets TSTP), Retry of the dead job (found back in
its queue on the queue page and in Redis), "Recover now" (the orphan goes
back to its queue), select-all and Delete on a second page of retries; the
actions are in the audit trail. A payload holding markup must show as text
and never run; a second server with --read-only shows no action button;
a third, of queue group eu (layout 2), names its group.

Usage: browser_test.py [RELIABLEQ_BIN]   (or env RELIABLEQ_BIN)
Exits 0 when every check passed, 1 with the reason otherwise.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
import zlib

# Debian's python3-selenium lives in the system interpreter's dist-packages;
# a python3 found first on PATH (pyenv, a venv) may not see it.
try:
    from selenium import webdriver
except ImportError:
    system_python = '/usr/bin/python3'
    if os.path.exists(system_python) and os.path.realpath(sys.executable) != os.path.realpath(system_python) \
            and not os.environ.get('RELIABLEQ_BROWSER_TEST_REEXEC'):
        os.environ['RELIABLEQ_BROWSER_TEST_REEXEC'] = '1'
        os.execv(system_python, [system_python] + sys.argv)
    print('FAIL: python3-selenium is not installed (tools/setup installs it)', file=sys.stderr)
    sys.exit(1)
from selenium.common.exceptions import (NoAlertPresentException, StaleElementReferenceException, TimeoutException,
                                        WebDriverException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

# The shared Python tooling in tools/lib, found in the nearest folder above
# this one that holds it.
LIB = os.path.dirname(os.path.realpath(__file__))
while not os.path.isdir(os.path.join(LIB, 'tools', 'lib')) and LIB != os.path.dirname(LIB):
    LIB = os.path.dirname(LIB)
sys.path.insert(0, os.path.join(LIB, 'tools', 'lib'))
from rqtools.servers import RedisServer, ServerError, free_port  # noqa: E402

XSS = '<img src=x onerror=alert(1)>'
BACKTRACE = ["app/jobs/flaky_job.rb:12:in `perform'", 'lib/net/http.rb:960:in `connect\'']
DEAD_JID = 'dead0000000000000000beef'
RETRY_JID = 'retr0000000000000000c0de'
ORPHAN_JID = 'orph0000000000000000f00d'
BUSY_JID = 'busy00000000000000001234'
LIVE_IDENTITY = 'webhost:4242:0123456789ab'
DEAD_IDENTITY = 'webhost:999:deaddeaddead'
WAIT = 10  # seconds any one wait may last
# A redraw may replace an element between finding it and reading it.
IGNORED = (StaleElementReferenceException,)
REFRESH_MS = 500  # the page's fastest pace (?refresh_ms)
CHART_POINTS = 12  # rates on the chart before its screenshot


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def wait_until(what, predicate, timeout=WAIT, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise Failure('timed out after %ss waiting for %s' % (timeout, what))


class Redis(RedisServer):
    """The test's redis-server; cli() gives a reply as redis-cli prints it."""

    def cli(self, *args):
        return str(self.call(*args))

    def lines(self, *args):
        return self.call(*args)


def stop(process, name):
    """Stops a process we started, by its PID: TERM, then KILL after 5 s."""
    if process is None or process.poll() is not None:
        return
    try:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        print('note: %s (pid %d) ignored TERM; killing it' % (name, process.pid), file=sys.stderr)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
    except ProcessLookupError:
        pass


def job(jid, klass, args, queue, **extra):
    now = time.time()
    fields = {'class': klass, 'args': args, 'retry': True, 'queue': queue, 'jid': jid,
              'created_at': now - 600, 'enqueued_at': now - 590}
    fields.update(extra)
    return json.dumps(fields, separators=(',', ':'))


def seed(redis, reliableq, redis_url):
    """Data every page must show."""
    def push(*args):
        result = subprocess.run([reliableq, '--redis', redis_url, 'push'] + list(args),
                                capture_output=True, text=True, timeout=WAIT)
        check(result.returncode == 0, 'reliableq push %s failed: %s' % (args, result.stderr.strip()))
        return result.stdout.strip()

    queued = [push('HardJob', json.dumps([i, 'bob']), '-q', 'default') for i in range(3)]
    push('UrgentJob', '[1]', '-q', 'critical')
    scheduled = push('Reminder', '[42]', '-q', 'mail', '--in', '3600')
    now = time.time()
    redis.cli('ZADD', 'retry', '%.6f' % (now + 900), job(
        RETRY_JID, 'FlakyJob', ['x'], 'default', failed_at=now - 60, retry_count=0,
        error_class='Net::ReadTimeout', error_message='timed out',
        # Sidekiq's compressed backtrace: base64 of zlib-deflated JSON lines.
        error_backtrace=base64.encodebytes(zlib.compress(json.dumps(BACKTRACE).encode())).decode()))
    redis.cli('ZADD', 'dead', '%.6f' % (now - 120), job(
        DEAD_JID, 'PaymentJob', [7, XSS], 'default', failed_at=now - 3000, retry_count=25,
        error_class='PaymentError', error_message='card declined ' + XSS))
    # A Sidekiq-style live process (no reliableq heartbeat) running one job.
    info = {'hostname': 'webhost', 'started_at': now - 3600, 'pid': 4242, 'tag': 'shop',
            'concurrency': 5, 'queues': ['default', 'critical'], 'labels': ['blue'],
            'identity': LIVE_IDENTITY, 'version': 'reliableq 0.1.0'}
    redis.cli('SADD', 'processes', LIVE_IDENTITY)
    redis.cli('HSET', LIVE_IDENTITY, 'info', json.dumps(info), 'busy', '1', 'beat', '%.6f' % now,
              'quiet', 'false', 'rss', '20480', 'rtt_us', '150')
    redis.cli('EXPIRE', LIVE_IDENTITY, 60)
    work = json.dumps({'queue': 'default', 'payload': job(BUSY_JID, 'ReportJob', [2024], 'default'),
                       'run_at': int(now - 5)})
    for key in (LIVE_IDENTITY + ':work', LIVE_IDENTITY + ':workers'):
        redis.cli('HSET', key, 'p0', work)
        redis.cli('EXPIRE', key, 60)
    # A dead reliableq process: a registry entry and a working list, no
    # heartbeat key, so the janitor (or "Recover now") would requeue its job.
    entry = {'identity': DEAD_IDENTITY, 'hostname': 'webhost', 'pid': 999,
             'started_at': now - 7200, 'queues': ['default']}
    redis.cli('HSET', 'reliableq:registry', DEAD_IDENTITY, json.dumps(entry))
    redis.cli('LPUSH', 'reliableq:working:%s:default' % DEAD_IDENTITY, job(ORPHAN_JID, 'ExportJob', ['q3'], 'default'))
    return queued, scheduled


class Page:
    def __init__(self, driver, base, shots):
        self.driver = driver
        self.base = base
        self.shots = shots

    def open(self, hash_route):
        """Loads a route and waits until the page drew it."""
        # ?refresh_ms: the page redraws twice a second, so the chart has its
        # points within a few seconds.
        self.driver.get('%s/?refresh_ms=%d%s' % (self.base, REFRESH_MS, hash_route))
        self.wait_ready(hash_route)

    def wait_ready(self, hash_route):
        try:
            WebDriverWait(self.driver, WAIT, ignored_exceptions=IGNORED).until(lambda d: d.execute_script(
                "const v = document.getElementById('view');"
                "return v.dataset.hash === arguments[0] && v.dataset.state !== 'loading' ? v.dataset.state : null;",
                hash_route))
        except TimeoutException:
            raise Failure('page %s never finished loading (status line: %r)' % (hash_route, self.status()))
        state = self.driver.find_element(By.ID, 'view').get_attribute('data-state')
        check(state == 'ready', 'page %s failed to load: %r' % (hash_route, self.status()))
        self.no_alert(hash_route)

    def attribute(self, selector, name):
        """An attribute read in one step (a redraw may replace the element
        between two WebDriver calls)."""
        return self.driver.execute_script(
            'const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;',
            selector, name)

    def text(self, selector, what):
        """An element's text read in one step (see attribute)."""
        value = self.driver.execute_script(
            'const e = document.querySelector(arguments[0]); return e ? e.innerText : null;', selector)
        check(value is not None, '%s: nothing matches %s' % (what, selector))
        return value.strip()

    def present(self, selector):
        return self.driver.execute_script('return document.querySelector(arguments[0]) !== null;', selector)

    def pause(self):
        """Stops the live refresh with the page's toggle, and checks that it
        stopped: later checks then hold on to elements that stay."""
        self.click('[data-testid=pause]', 'pause toggle')
        check(self.attribute('[data-testid=pause]', 'aria-pressed') == 'true', 'the pause toggle did not toggle')
        wait_until('the redraw under way to end', lambda: self.attribute('#view', 'data-busy') != 'true')
        before = self.attribute('#view', 'data-render')
        time.sleep(2.5 * REFRESH_MS / 1000)
        after = self.attribute('#view', 'data-render')
        check(before == after, 'the page still redraws itself while paused (render %s, then %s)' % (before, after))

    def status(self):
        return self.driver.find_element(By.ID, 'status').text

    def all(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector, what):
        found = self.all(selector)
        check(found, '%s: nothing matches %s' % (what, selector))
        return found[0]

    def wait_for(self, selector, what):
        try:
            return WebDriverWait(self.driver, WAIT, ignored_exceptions=IGNORED).until(lambda d: d.find_elements(By.CSS_SELECTOR, selector))[0]
        except TimeoutException:
            raise Failure('%s: %s never appeared (status line: %r)' % (what, selector, self.status()))

    def no_alert(self, where):
        try:
            text = self.driver.switch_to.alert.text
        except NoAlertPresentException:
            return
        raise Failure('%s: an unexpected dialog opened: %r (a payload ran as markup?)' % (where, text))

    def no_markup_from_data(self, where):
        images = self.driver.execute_script("return document.querySelectorAll('#view img').length")
        check(images == 0, '%s: the page holds %d <img> elements: a payload became markup' % (where, images))

    def screenshot(self, name):
        path = os.path.join(self.shots, name + '.png')
        check(self.driver.save_screenshot(path), 'could not save screenshot ' + path)

    def click(self, selector, what):
        self.one(selector, what).click()

    def accept_confirm(self, what):
        try:
            alert = WebDriverWait(self.driver, WAIT).until(expected_conditions.alert_is_present())
        except TimeoutException:
            raise Failure('%s: no confirmation dialog' % what)
        alert.accept()


def run(reliableq, shots, workdir):
    redis_port = free_port()
    web_port = free_port()
    while web_port == redis_port:
        web_port = free_port()
    redis_url = 'redis://127.0.0.1:%d/0' % redis_port
    processes = []
    driver = None
    try:
        redis = Redis(os.path.join(workdir, 'redis'), port=redis_port, unix=False, timeout=WAIT).start(limit=WAIT)
        processes.append((redis.proc, 'redis-server'))

        queued, scheduled = seed(redis, reliableq, redis_url)

        web_log = open(os.path.join(workdir, 'web.log'), 'w')
        web = subprocess.Popen([reliableq, '--redis', redis_url, 'web', '--http', '127.0.0.1:%d' % web_port],
                               stdout=web_log, stderr=subprocess.STDOUT)
        processes.append((web, 'reliableq web'))
        base = 'http://127.0.0.1:%d' % web_port

        def healthy(server, url):
            if server.poll() is not None:
                web_log.flush()
                raise Failure('reliableq web exited with %s: %s' % (server.returncode, open(web_log.name).read()[-2000:]))
            try:
                with urllib.request.urlopen(url + '/healthz', timeout=2) as answer:
                    return answer.status == 200
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                return False
        wait_until('reliableq web /healthz to answer 200', lambda: healthy(web, base))

        def start_web(name, options, web_options):
            """Starts `reliableq OPTIONS web WEB_OPTIONS` on a port of its own and
            waits until it answers; returns its base URL."""
            port = free_port()
            server = subprocess.Popen([reliableq, '--redis', redis_url] + options + ['web'] + web_options
                                      + ['--http', '127.0.0.1:%d' % port],
                                      stdout=web_log, stderr=subprocess.STDOUT)
            processes.append((server, name))
            url = 'http://127.0.0.1:%d' % port
            wait_until('%s to answer' % name, lambda: healthy(server, url))
            return url

        options = webdriver.ChromeOptions()
        options.binary_location = '/usr/bin/chromium'
        for argument in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                         '--window-size=1280,900', '--user-data-dir=' + os.path.join(workdir, 'chromium')):
            options.add_argument(argument)
        options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        options.set_capability('unhandledPromptBehavior', 'ignore')
        driver = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=options)
        driver.set_page_load_timeout(WAIT)
        driver.set_script_timeout(WAIT)
        page = Page(driver, base, shots)

        # Overview: the totals, the queue table, the chart once it has points.
        page.open('#/')
        # The page redraws itself twice a second here: every read is one step.
        for key, expected in (('dead', '1'), ('retries', '1'), ('scheduled', '1'), ('enqueued', '4'), ('orphaned', '1')):
            shown = page.text('[data-testid=stat-%s] .stat-value' % key, 'overview')
            check(shown == expected, 'overview: %s shows %r, not %s' % (key, shown, expected))
        size = page.text('[data-testid=queue-row][data-name=default] [data-testid=queue-size]', 'overview queues')
        check(size == '3', 'overview: queue default shows size %r, not 3' % size)
        check(page.present('[data-testid=queue-row][data-name=critical]'), 'overview: queue critical is missing')
        # Jobs finish meanwhile (Sidekiq's counters move, as a worker's acks
        # move them): the live chart must show a rate above zero.
        stop_counting = threading.Event()

        def count():
            step = 0
            while not stop_counting.wait(0.1):
                step += 1
                redis.cli('INCRBY', 'stat:processed', 20 + (step * 7) % 23)
                redis.cli('INCRBY', 'stat:failed', step % 3)
        counter = threading.Thread(target=count, daemon=True)
        counter.start()
        try:
            WebDriverWait(driver, CHART_POINTS * REFRESH_MS / 1000 + WAIT, ignored_exceptions=IGNORED).until(
                lambda d: int(page.attribute('[data-testid=chart]', 'data-points') or 0) >= CHART_POINTS
                and float(page.attribute('[data-testid=rate-failed]', 'data-value') or 0) > 0)
        except TimeoutException:
            raise Failure('overview: the chart never showed jobs per second (the page does not refresh?)')
        finally:
            stop_counting.set()
            counter.join(timeout=WAIT)
        page.screenshot('overview')
        page.pause()
        rate = float(page.attribute('[data-testid=rate-processed]', 'data-value') or 0)
        check(rate > 0, 'overview: processed per second is %s while jobs finish' % rate)

        # Busy: the live process, its tag and its running job.
        page.open('#/busy')
        process = page.one('[data-testid=process][data-identity="%s"]' % LIVE_IDENTITY, 'busy')
        check('shop' in process.text, 'busy: the tag is missing')
        check(process.find_elements(By.CSS_SELECTOR, '[data-testid=busy-job][data-jid="%s"]' % BUSY_JID),
              'busy: the running job is missing')
        check(page.all('[data-testid=process-stop-button]') and page.all('[data-testid=quiet-all]'),
              'busy: the Quiet/Stop buttons are missing')
        page.screenshot('busy')
        # Its Quiet button sends Sidekiq's TSTP signal to the process.
        page.click('[data-testid=process][data-identity="%s"] [data-testid=process-quiet-button]' % LIVE_IDENTITY, 'busy')
        page.accept_confirm('busy: Quiet')
        wait_until('the result of Quiet', lambda: page.attribute('#status', 'data-kind') in ('ok', 'error'))
        check(page.attribute('#status', 'data-kind') == 'ok', 'busy: Quiet failed: %r' % page.status())
        signals = redis.lines('LRANGE', LIVE_IDENTITY + '-signals', 0, -1)
        check(signals == ['TSTP'], 'Redis: the process received %s, not TSTP' % signals)

        # Queues, then one queue's jobs.
        page.open('#/queues')
        check(page.all('[data-testid=queue-row][data-name=default]'), 'queues: default is missing')
        page.screenshot('queues')
        page.open('#/queues/default')
        jids = [row.get_attribute('data-jid') for row in page.all('[data-testid=queue-job]')]
        check(sorted(jids) == sorted(queued), 'queue page: jobs %s, expected %s' % (jids, queued))
        page.screenshot('queue')
        # Its Pause button pauses the queue in Redis; the page then marks it
        # and offers Resume, which undoes it.
        page.click('[data-testid=pause-queue]', 'queue page')
        page.accept_confirm('queue page: Pause')
        wait_until('the queue page to mark the pause', lambda: page.present('[data-testid=queue-paused]'))
        check(redis.lines('SMEMBERS', 'reliableq:paused') == ['default'], 'Redis: default is not paused')
        page.open('#/queues')
        check(page.all('[data-testid=queue-row][data-name=default] [data-testid=queue-paused]'),
              'queues: default is not marked paused')
        page.open('#/queues/default')
        page.click('[data-testid=resume-queue]', 'queue page')
        page.accept_confirm('queue page: Resume')
        wait_until('the queue page to offer Pause again', lambda: page.present('[data-testid=pause-queue]'))
        check(redis.cli('EXISTS', 'reliableq:paused').strip() == '0', 'Redis: default is still paused')

        # The three sets.
        page.open('#/retries')
        check(page.all('[data-testid=set-row][data-jid="%s"]' % RETRY_JID), 'retries: the retry entry is missing')
        check(page.all('[data-testid=action-kill]'), 'retries: no Kill button')
        page.screenshot('retries')
        # Its detail page decodes the backtrace.
        page.click('[data-testid=set-row][data-jid="%s"] [data-testid=job-link]' % RETRY_JID, 'retries')
        hash_route = wait_until('the job page', lambda: driver.execute_script(
            "return location.hash.startsWith('#/job/retry/') ? location.hash : null"))
        page.wait_ready(hash_route)
        shown = page.text('[data-testid=job-backtrace]', 'retry job page')
        check(shown == '\n'.join(BACKTRACE), 'retry job page: backtrace %r, not %r' % (shown, BACKTRACE))
        page.screenshot('job-retry')
        page.open('#/scheduled')
        check(page.all('[data-testid=set-row][data-jid="%s"]' % scheduled), 'scheduled: the scheduled job is missing')
        page.screenshot('scheduled')
        page.open('#/dead')
        row = page.one('[data-testid=set-row][data-jid="%s"]' % DEAD_JID, 'dead')
        check(XSS in row.text, 'dead: the payload markup is not shown as text: %r' % row.text)
        check(not page.all('[data-testid=action-kill]'), 'dead: a Kill button on the dead set')
        page.no_markup_from_data('dead')
        page.screenshot('dead')

        # The dead job's detail page, reached by its link.
        row.find_element(By.CSS_SELECTOR, '[data-testid=job-link]').click()
        hash_route = wait_until('the job page', lambda: driver.execute_script(
            "return location.hash.startsWith('#/job/dead/') ? location.hash : null"))
        page.wait_ready(hash_route)
        payload = page.one('[data-testid=job-payload]', 'job page').text
        check(DEAD_JID in payload and XSS in payload, 'job page: the payload is not shown literally: %r' % payload)
        check(XSS in page.one('[data-testid=job-error]', 'job page').text, 'job page: the error is not shown')
        page.no_markup_from_data('job page')
        page.screenshot('job')

        # Where that job is now: its lookup page, from the job page's link;
        # then the top bar's box finds the retry by its jid.
        page.click('[data-testid=job-where]', 'job page')
        hash_route = wait_until('the lookup page', lambda: driver.execute_script(
            "return location.hash.startsWith('#/jid/') ? location.hash : null"))
        page.wait_ready(hash_route)
        check(page.attribute('[data-testid=lookup]', 'data-state') == 'dead',
              'lookup page: state %r, not dead' % page.attribute('[data-testid=lookup]', 'data-state'))
        check(page.text('[data-testid=lookup-sentence]', 'lookup page').startswith('Dead since '),
              'lookup page: the sentence does not say dead')
        check(XSS in page.one('[data-testid=lookup-payload]', 'lookup page').text,
              'lookup page: the payload is not shown literally')
        page.no_markup_from_data('lookup page')
        page.screenshot('lookup')
        box = page.one('[data-testid=find-jid]', 'top bar')
        box.clear()
        box.send_keys(RETRY_JID)
        page.click('[data-testid=find-submit]', 'top bar')
        page.wait_ready('#/jid/' + RETRY_JID)
        check(page.attribute('[data-testid=lookup]', 'data-state') == 'retry',
              'lookup page: the retry entry is not found by the top bar box')

        # Recovery: the dead process's job and the preview.
        page.open('#/recovery')
        orphan = page.one('[data-testid=orphan][data-identity="%s"]' % DEAD_IDENTITY, 'recovery')
        check(orphan.find_elements(By.CSS_SELECTOR, '[data-testid=orphan-job][data-jid="%s"]' % ORPHAN_JID),
              'recovery: the orphaned job is missing')
        preview = orphan.find_elements(By.CSS_SELECTOR, '[data-testid=preview-row][data-queue=default] td')
        check(len(preview) == 3 and preview[1].text == '1',
              'recovery: the preview does not say 1 job back to default: %r' % [c.text for c in preview])
        check(page.all('[data-testid=recover-now]'), 'recovery: no "Recover now" button')
        page.screenshot('recovery')

        # Retry the dead job with the page's buttons: select its row, Retry.
        page.open('#/dead')
        page.click('[data-testid=set-row][data-jid="%s"] [data-testid=row-select]' % DEAD_JID, 'dead')
        retry = page.one('[data-testid=action-retry]', 'dead')
        check(retry.is_enabled(), 'dead: Retry stays disabled with a row selected')
        retry.click()
        page.accept_confirm('dead: Retry')
        try:
            WebDriverWait(driver, WAIT, ignored_exceptions=IGNORED).until(lambda d: d.find_element(By.ID, 'status').get_attribute('data-kind') in ('ok', 'error'))
        except TimeoutException:
            raise Failure('dead: no result after Retry')
        check(page.one('#status', 'dead').get_attribute('data-kind') == 'ok', 'dead: Retry failed: %r' % page.status())
        wait_until('the dead row to go', lambda: not page.all('[data-testid=set-row][data-jid="%s"]' % DEAD_JID))
        check(redis.cli('ZCARD', 'dead').strip() == '0', 'Redis: the dead set is not empty after Retry')
        check(any(DEAD_JID in payload for payload in redis.lines('LRANGE', 'queue:default', 0, -1)),
              'Redis: the retried job is not in queue:default')
        page.open('#/queues/default')
        check(page.all('[data-testid=queue-job][data-jid="%s"]' % DEAD_JID), 'queue page: the retried job is missing')
        page.no_markup_from_data('queue page')
        page.screenshot('queue-after-retry')

        # "Recover now" returns the dead process's job to its queue.
        page.open('#/recovery')
        page.click('[data-testid=recover-now]', 'recovery')
        page.accept_confirm('recovery: Recover now')
        wait_until('the orphan to go', lambda: not page.present('[data-testid=orphan]'))
        check(page.one('#status', 'recovery').get_attribute('data-kind') == 'ok',
              'recovery: Recover now failed: %r' % page.status())
        check(DEAD_IDENTITY in page.status(), 'recovery: the result does not name the process: %r' % page.status())
        check(redis.cli('LLEN', 'reliableq:working:%s:default' % DEAD_IDENTITY).strip() == '0',
              'Redis: the working list still holds the job after Recover now')
        check(any(ORPHAN_JID in payload for payload in redis.lines('LRANGE', 'queue:default', 0, -1)),
              'Redis: the recovered job is not in queue:default')

        # Both actions are in the audit trail.
        page.open('#/audit')
        for action in ('retry', 'recover'):
            check(page.all('[data-testid=audit-row][data-action=%s]' % action), 'audit: no %s entry' % action)
        page.screenshot('audit')

        # Paging and select-all: 30 more retries, page 2 holds the last 6;
        # select them all and delete them.
        now = time.time()
        for i in range(30):
            redis.cli('ZADD', 'retry', '%.6f' % (now + 1000 + i), job('fill%020d' % i, 'FillJob', [i], 'default',
                                                                     error_class='E', error_message='m'))
        page.open('#/retries?page=2')
        rows = page.all('[data-testid=set-row]')
        check(len(rows) == 6, 'retries page 2: %d rows, not 6' % len(rows))
        check(page.all('[data-testid=pager] [data-testid=page-1]'), 'retries page 2: no link to page 1')
        page.click('[data-testid=select-all]', 'retries page 2')
        checked = [box.is_selected() for box in page.all('[data-testid=row-select]')]
        check(checked == [True] * 6, 'retries page 2: select-all checked %s' % checked)
        page.click('[data-testid=action-delete]', 'retries page 2')
        page.accept_confirm('retries: Delete')
        wait_until('the page to empty', lambda: not page.present('[data-testid=set-row]'))
        check(redis.cli('ZCARD', 'retry').strip() == '25', 'Redis: retry holds %s entries, not 25' % redis.cli('ZCARD', 'retry').strip())
        check(any(RETRY_JID in m for m in redis.lines('ZRANGE', 'retry', 0, -1)), 'Redis: a retry off the page was deleted')

        # No page broke the Content-Security-Policy or threw.
        problems = [entry['message'] for entry in driver.get_log('browser')
                    if entry['level'] == 'SEVERE' and 'favicon.ico' not in entry['message']]
        check(not problems, 'browser console errors: %s' % problems)
        page.no_alert('the end')

        # --read-only: the same pages without a single action button.
        read_only_base = start_web('reliableq web --read-only', [], ['--read-only'])
        page = Page(driver, read_only_base, shots)
        page.open('#/')
        page.pause()
        redis.cli('ZADD', 'dead', '%.6f' % time.time(), job(DEAD_JID, 'PaymentJob', [8], 'default'))
        for route in ('#/dead', '#/busy', '#/queues/default', '#/recovery'):
            page.open(route)
            buttons = [b.text for b in page.all('#view button')]
            check(not buttons, 'read-only %s: action buttons shown: %s' % (route, buttons))
        check(page.one('[data-testid=read-only]', 'read-only').is_displayed(), 'read-only: no read-only badge')
        check(not page.one('[data-testid=group]', 'read-only').is_displayed(),
              'layout 1: a group badge is shown')

        # A dashboard of a queue group (layout 2) names its group.
        group_base = start_web('reliableq web --group eu', ['--group', 'eu'], ['--read-only'])
        page = Page(driver, group_base, shots)
        page.open('#/')
        badge = page.one('[data-testid=group]', 'group')
        check(badge.is_displayed() and badge.text == 'group eu',
              'a group\'s dashboard does not name it: %r' % badge.text)
    finally:
        if driver is not None:
            try:
                driver.quit()
            except WebDriverException:
                pass
        for process, name in reversed(processes):
            stop(process, name)


def main():
    reliableq = sys.argv[1] if len(sys.argv) > 1 else os.environ.get('RELIABLEQ_BIN', '')
    if not reliableq or not os.access(reliableq, os.X_OK):
        print('FAIL: give the reliableq program as argument or RELIABLEQ_BIN (got %r)' % reliableq, file=sys.stderr)
        return 1
    for program in ('redis-server', 'redis-cli', '/usr/bin/chromium', '/usr/bin/chromedriver'):
        if shutil.which(program) is None:
            print('FAIL: %s is not installed (tools/setup installs it)' % program, file=sys.stderr)
            return 1
    shots = os.environ.get('SCREENSHOT_DIR') or os.path.join('build', 'screenshots')
    os.makedirs(shots, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='reliableq-web-') as workdir:
        try:
            run(reliableq, shots, workdir)
        except (Failure, ServerError, WebDriverException, subprocess.TimeoutExpired) as error:
            print('FAIL: %s' % error, file=sys.stderr)
            if not isinstance(error, Failure):
                traceback.print_exc()
            log = os.path.join(workdir, 'web.log')
            if os.path.exists(log):
                print('--- reliableq web log (end) ---\n' + open(log).read()[-3000:], file=sys.stderr)
            return 1
    print('ok: every page shown and its actions done from the page; %.1f s; screenshots in %s'
          % (time.monotonic() - started, shots))
    return 0


if __name__ == '__main__':
    sys.exit(main())

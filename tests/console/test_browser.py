"""The console in a real browser: what a person opening it sees.

Debian's headless ``chromium``, driven through Debian's ``chromium-driver`` by Selenium
(both installed by ``.ci/install-tools``; missing, skipped with a reason, failed in CI:
``tests.support.debian_tool``), against a real ``skerry serve`` with the console on: two topics with
messages, a group that falls behind. The assertions read the rendered page: the rows,
texts and chart a person looks at.

Each page's screenshot is saved to ``$SKERRY_CONSOLE_SCREENSHOTS`` (default
``build/console-screenshots/``); ``docs/console/`` holds a copy from one run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.auth import hash_token
from tests.console.scenario import (
    BINARY_VALUE,
    INTERNAL_GROUP,
    INTERNAL_TOPIC,
    MEMBER,
    SCRIPT_VALUE,
    ConsoleBroker,
    catch_up,
    fill,
    produce_more,
    seed_consumer_group,
    seed_internal,
)
from tests.support import ROOT, debian_tool

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(pip install selenium; it is in the test extra)")
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

TOKEN = "browser-test-token-9c2f7e"
WAIT_S = 20.0


def screenshot_dir() -> Path:
    folder = Path(os.environ.get("SKERRY_CONSOLE_SCREENSHOTS")
                  or ROOT / "build" / "console-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    chromium = debian_tool("chromium", "chromium")
    chromedriver = debian_tool("chromedriver", "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", "--hide-scrollbars", "--no-first-run",
                 "--disable-extensions", "--disable-background-networking"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=chromedriver)
    browser = webdriver.Chrome(options=options, service=service)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    running = ConsoleBroker(tmp_path_factory.mktemp("console-browser"),
                            sample_interval_ms=500).start()
    try:
        fill(running)
        yield running
    finally:
        running.stop()


def wait(driver: Any, condition: Any, message: str) -> Any:
    return WebDriverWait(driver, WAIT_S).until(condition, message)


def texts(driver: Any, css: str) -> list[str]:
    """The visible text of every element matching ``css``, read in one go (the page
    redraws its tables as it polls, so elements found one call earlier may be gone)."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText)", css)


def attribute(driver: Any, css: str, name: str) -> str | None:
    return driver.execute_script(  # type: ignore[no-any-return]
        "const e = document.querySelector(arguments[0]);"
        "return e === null ? null : e.getAttribute(arguments[1])", css, name)


def text_of(driver: Any, css: str) -> str:
    found = texts(driver, css)
    assert found, f"nothing matches {css}"
    return found[0]


def open_page(driver: Any, url: str, ready_css: str) -> None:
    driver.get(url)
    wait(driver, expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ready_css)),
         f"{ready_css} never appeared at {url}")


def no_alert(driver: Any) -> bool:
    try:
        WebDriverWait(driver, 1.0).until(expected_conditions.alert_is_present())
    except TimeoutException:
        return True
    driver.switch_to.alert.dismiss()
    return False


def save(driver: Any, name: str) -> None:
    driver.save_screenshot(str(screenshot_dir() / name))


class ConsolePagesTests:
    """One walk through every page, in order (they share the broker and the browser)."""

    def test_1_overview(self, driver: Any, broker: ConsoleBroker) -> None:
        """The overview names the broker and its version, shows the fsync policy, storage
        used and the rate sparklines."""
        open_page(driver, broker.base + "/", "#produce-rate svg.spark")
        assert broker.v1 in text_of(driver, ".cards .card:first-child")
        assert "never" in driver.find_element(By.CSS_SELECTOR, "main").text  # fsync
        assert text_of(driver, "#storage .value").endswith("B")
        wait(driver, lambda d: int(attribute(d, "#produce-rate svg", "data-points") or 0) >= 2,
             "the produce sparkline never got two points")
        save(driver, "overview.png")

    def test_2_topics(self, driver: Any, broker: ConsoleBroker) -> None:
        """The topic list has a row per topic with its partitions and messages."""
        open_page(driver, broker.base + "/#/topics", "#topics-table tr[data-topic]")
        rows = {name: texts(driver, f"#topics-table tr[data-topic='{name}'] td")
                for name in ("orders", "payments")}
        assert rows["orders"][:3] == ["orders", "2", "6"]
        assert rows["payments"][:3] == ["payments", "1", "2"]
        save(driver, "topics.png")

    def test_3_message_browser_shows_values_as_text(self, driver: Any,
                                                    broker: ConsoleBroker) -> None:
        """On the topic page the browser shows the produced values; the one holding a
        script tag is shown as those characters: no alert, no script element added."""
        open_page(driver, broker.base + "/#/topics/orders", "#partitions-table tr")
        Select(driver.find_element(By.ID, "browse-partition")).select_by_value("0")
        Select(driver.find_element(By.ID, "browse-mode")).select_by_value("offset")
        offset = driver.find_element(By.ID, "browse-offset")
        offset.clear()
        offset.send_keys("0")
        driver.find_element(By.ID, "browse-load").click()
        wait(driver, lambda d: texts(d, "#messages-table tr[data-offset='0']"),
             "offset 0 never shown")
        values = texts(driver, "#messages-table .message-value")
        assert values == [SCRIPT_VALUE, "created", "paid"]
        assert no_alert(driver)
        scripts = driver.execute_script(
            "return Array.from(document.scripts, s => s.getAttribute('src'))")
        assert scripts == ["console.js"]
        assert driver.find_elements(By.CSS_SELECTOR, "#messages-table script") == []
        save(driver, "topic.png")
        Select(driver.find_element(By.ID, "browse-view")).select_by_value("hex")
        first = text_of(driver, "#messages-table tr[data-offset='0'] .message-value")
        assert first.startswith("3c 73 63 72 69 70 74 3e")  # "<script>"
        Select(driver.find_element(By.ID, "browse-view")).select_by_value("text")

    def test_4_binary_values_are_shown_in_hex(self, driver: Any,
                                              broker: ConsoleBroker) -> None:
        """A value that is not UTF-8 is labelled binary and shown as hex bytes."""
        Select(driver.find_element(By.ID, "browse-partition")).select_by_value("1")
        driver.find_element(By.ID, "browse-load").click()
        wait(driver, lambda d: "binary" in "".join(
            texts(d, "#messages-table tr[data-offset='0'] .message-value")),
             "the binary value was never shown")
        cell = text_of(driver, "#messages-table tr[data-offset='0'] .message-value")
        assert f"binary, {len(BINARY_VALUE)} bytes" in cell
        assert " ".join(f"{b:02x}" for b in BINARY_VALUE[:8]) in cell

    def test_5_groups(self, driver: Any, broker: ConsoleBroker) -> None:
        """The group list shows the group behind on its topic with its lag."""
        open_page(driver, broker.base + "/#/groups", "#groups-table tr[data-group='billing']")
        cells = texts(driver, "#groups-table tr[data-group='billing'] td")
        assert cells[:4] == ["billing", "orders", "stable", "1"] and cells[-1] == "4"
        save(driver, "groups.png")

    def test_6_group_lag_number_and_chart_follow_produces(self, driver: Any,
                                                          broker: ConsoleBroker) -> None:
        """The group page shows lag 4; after 5 more messages per partition, without a
        reload, the number reads 14 and the chart's last sample totals 14; when the reader
        commits further on one partition, its line comes down."""
        open_page(driver, broker.base + "/#/groups/billing/orders", "#lag-chart")
        assert text_of(driver, "#group-lag .value") == "4"
        assert MEMBER in text_of(driver, "#group-members")
        wait(driver, lambda d: attribute(d, "#lag-chart", "data-last-total") == "4",
             "the chart never showed lag 4")
        samples_before = int(attribute(driver, "#lag-chart", "data-samples") or 0)
        produce_more(broker, 5)
        wait(driver, lambda d: texts(d, "#group-lag .value") == ["14"],
             "the lag number never reached 14")
        wait(driver, lambda d: attribute(d, "#lag-chart", "data-last-total") == "14",
             "the chart never reached 14")
        assert int(attribute(driver, "#lag-chart", "data-samples") or 0) > samples_before
        lines = driver.execute_script(
            "return Array.from(document.querySelectorAll('#lag-chart polyline[data-partition]'),"
            " l => [l.getAttribute('data-partition'), l.getAttribute('points')])")
        assert sorted(partition for partition, _ in lines) == ["0", "1"]
        assert all(len(points.split()) >= 2 for _, points in lines)
        assert texts(driver, "#group-partitions .lag") == ["7", "7"]
        catch_up(broker, 0, 5)  # partition 0's reader catches up by four
        wait(driver, lambda d: attribute(d, "#lag-chart", "data-last-total") == "10",
             "the chart never came down to 10")
        assert texts(driver, "#group-partitions .lag") == ["3", "7"]
        save(driver, "group.png")

    def test_7_cluster(self, driver: Any, broker: ConsoleBroker) -> None:
        """A single broker: one broker, controller, leading all three partitions."""
        open_page(driver, broker.base + "/#/cluster", "#leaders-table tbody tr")
        assert len(texts(driver, "#brokers-table tbody tr")) == 1
        assert texts(driver, "#brokers-table tbody td") == [
            "0", broker.v1, "controller, this broker", "3"]
        assert len(texts(driver, "#leaders-table tbody tr")) == 3
        assert text_of(driver, "#under-replicated .value") == "0"
        save(driver, "cluster.png")

    def test_8_readable_on_a_phone(self, driver: Any, broker: ConsoleBroker) -> None:
        """At a phone's width the pages do not scroll sideways (wide tables scroll inside
        their own box)."""
        driver.set_window_size(390, 844)
        try:
            for route, ready in (("/#/", "#produce-rate"), ("/#/topics/orders", "#partitions-table"),
                                 ("/#/groups/billing/orders", "#lag-chart")):
                open_page(driver, broker.base + route, ready)
                width = driver.execute_script(
                    "return [document.documentElement.scrollWidth, window.innerWidth]")
                assert width[0] <= width[1], (route, width)
            save(driver, "group-phone.png")
        finally:
            driver.set_window_size(1280, 900)


@pytest.fixture(scope="module")
def with_internal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    workdir = tmp_path_factory.mktemp("console-browser-internal")
    seed_internal(workdir)
    running = ConsoleBroker(workdir).start()
    try:
        fill(running)
        yield running
    finally:
        running.stop()


def shown_rows(driver: Any, css: str, attr: str) -> list[str]:
    return driver.execute_script(  # type: ignore[no-any-return]
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.getAttribute(arguments[1]))",
        css, attr)


class InternalNamesTests:
    """The Iggy transport's internal topics and groups stay out of the lists until the
    reader ticks "show internal", as ``skerry topics list`` shows them only with
    ``--internal``; the choice holds across pages and refreshes of the tab."""

    def test_internal_topics_and_groups_appear_only_when_asked(
            self, driver: Any, with_internal: ConsoleBroker) -> None:
        driver.get(with_internal.base + "/")
        driver.execute_script("sessionStorage.removeItem('skerry-console-internal')")
        open_page(driver, with_internal.base + "/#/topics", "#topics-table tr[data-topic]")
        assert shown_rows(driver, "#topics-table tr[data-topic]", "data-topic") == \
            ["orders", "payments"]
        assert "1 hidden" in text_of(driver, ".internal-toggle")
        driver.find_element(By.ID, "show-internal").click()
        wait(driver, lambda d: INTERNAL_TOPIC in shown_rows(
            d, "#topics-table tr[data-topic]", "data-topic"), "__iggy.0 never listed")
        # read in one go: the page redraws the toggle as it polls, so the element found one
        # call earlier may be gone (a fresh-clone run failed here with a stale element)
        assert driver.execute_script("return document.getElementById('show-internal').checked")
        save(driver, "topics-internal.png")
        open_page(driver, with_internal.base + "/#/groups",
                  f"#groups-table tr[data-group='{INTERNAL_GROUP}']")  # the choice holds
        driver.find_element(By.ID, "show-internal").click()
        wait(driver, lambda d: shown_rows(d, "#groups-table tr[data-group]", "data-group")
             == ["billing"], "the internal group stayed listed")
        assert "1 hidden" in text_of(driver, ".internal-toggle")
        open_page(driver, with_internal.base + "/#/cluster", "#leaders-table tbody tr")
        cells = texts(driver, "#leaders-table tbody td:first-child")
        assert INTERNAL_TOPIC not in cells and "orders" in cells


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    workdir = tmp_path_factory.mktemp("console-browser-auth")
    tokens = workdir / "tokens"
    tokens.write_text(f"alice:{hash_token(TOKEN)}\n")
    running = ConsoleBroker(workdir, auth={"tokens_file": str(tokens), "super_users": "alice"}).start()
    try:
        yield running
    finally:
        running.stop()


class LoginTests:
    def test_login_form_then_pages(self, driver: Any, secured: ConsoleBroker) -> None:
        """With auth on the page asks for a token; a wrong one is refused; the right one
        shows the overview, survives a reload of the tab, and Log out forgets it."""
        open_page(driver, secured.base + "/", "#login-form")
        wait(driver, expected_conditions.visibility_of_element_located((By.ID, "login")),
             "no login form")
        save(driver, "login.png")
        field = driver.find_element(By.ID, "login-token")
        field.send_keys("wrong")
        field.submit()
        wait(driver, lambda d: "refused" in d.find_element(By.ID, "login-error").text,
             "a wrong token was not refused")
        field = driver.find_element(By.ID, "login-token")
        field.send_keys(TOKEN)
        field.submit()
        wait(driver, expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, "#produce-rate")), "no overview after logging in")
        assert driver.execute_script(
            "return sessionStorage.getItem('skerry-console-token')") == TOKEN
        driver.refresh()
        wait(driver, expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, "#produce-rate")), "logged out by a reload")
        driver.find_element(By.ID, "logout").click()
        wait(driver, expected_conditions.visibility_of_element_located((By.ID, "login")),
             "Log out did not show the login form")
        assert driver.execute_script(
            "return sessionStorage.getItem('skerry-console-token')") is None
        driver.execute_script("sessionStorage.clear()")


class AccessPageTests:
    def test_access_page_shows_who_may_do_what(self, driver: Any,
                                               secured: ConsoleBroker) -> None:
        """After ACLs are added over V1, the Access page lists them (a deny marked as a
        warning) with the super user and the rule for resources without ACLs."""
        secured.user, secured.token = "alice", TOKEN
        with secured.client() as c:
            c.request("ADMIN_ACL_ADD", "User:bob Topic orders Read")
            c.request("ADMIN_ACL_ADD", "User:bob Topic team-a. Write pattern=prefixed")
            c.request("ADMIN_ACL_ADD", "User:bob Topic team-a.secret Write permission=deny")
        open_page(driver, secured.base + "/", "#login-form")
        wait(driver, expected_conditions.visibility_of_element_located((By.ID, "login")),
             "no login form")
        field = driver.find_element(By.ID, "login-token")
        field.send_keys(TOKEN)
        field.submit()
        wait(driver, expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, "#produce-rate")), "no overview after logging in")
        driver.find_element(By.CSS_SELECTOR, "nav a[data-page='access']").click()
        wait(driver, expected_conditions.presence_of_element_located(
            (By.CSS_SELECTOR, "#acls-table tbody tr")), "no ACL table")
        rows = [texts(driver, f"#acls-table tbody tr:nth-child({i}) td") for i in (1, 2, 3)]
        assert rows == [["User:bob", "Topic", "Literal", "orders", "Read", "Allow"],
                        ["User:bob", "Topic", "Prefixed", "team-a.", "Write", "Allow"],
                        ["User:bob", "Topic", "Literal", "team-a.secret", "Write", "Deny"]]
        assert driver.find_elements(By.CSS_SELECTOR, "#acls-table td.warn")
        assert "User:alice" in driver.find_element(By.CSS_SELECTOR, "main").text
        assert "super users only" in driver.find_element(By.CSS_SELECTOR, "main").text
        save(driver, "access.png")
        driver.find_element(By.ID, "logout").click()
        driver.execute_script("sessionStorage.clear()")


@pytest.fixture(scope="module")
def kip848(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    running = ConsoleBroker(tmp_path_factory.mktemp("console-browser-kip848")).start()
    try:
        seed_consumer_group(running)
        yield running
    finally:
        running.stop()


class ConsumerGroupPageTests:
    """A KIP-848 consumer group (GROUP_HEARTBEAT) on the group pages."""

    def test_type_epochs_and_pending_partitions(self, driver: Any,
                                                kip848: ConsoleBroker) -> None:
        """The list says the group is a consumer group; its page shows the group and
        assignment epochs, and per member its epoch, its partitions and the ones it waits
        for."""
        open_page(driver, kip848.base + "/#/groups", "#groups-table tr[data-group='dash']")
        assert text_of(driver, "#groups-table tr[data-group='dash'] .group-type") == "consumer"
        open_page(driver, kip848.base + "/#/groups/dash/clicks", "#group-members")
        assert "group epoch 2, assignment epoch 2" in text_of(driver, "#group-state")
        rows = {member: texts(driver, f"#group-members tr[data-member='{member}'] td")
                for member in ("w1", "w2")}
        assert rows == {"w1": ["w1", "1", "0, 1", "–"], "w2": ["w2", "2", "(none)", "2, 3"]}
        save(driver, "group-consumer.png")


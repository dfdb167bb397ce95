"""The gateway's page in a real browser: Debian's chromium, headless, driven by selenium through Debian's
chromium-driver (`make browser` installs both; no browser or driver is ever downloaded).

Screenshots go to SCREENSHOTS (.cache/page-screenshots; CI prints the folder): `make page-screenshots` copies them to
docs/images/ for the README.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("PAGE_SCREENSHOTS", ROOT / ".cache/page-screenshots"))
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextlib.contextmanager
def chromium(width: int = 1200, height: int = 900) -> Iterator:
    """A headless chromium (a throw-away profile, no network but what the page asks), quit afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, DRIVER):
        assert shutil.which(path), f"{path} is missing: `make browser` installs Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root, in a container-like VM
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(check: Callable[[], object], timeout: float = 15, what: str = "the page") -> object:
    """check()'s first truthy value within `timeout` seconds (selenium's errors while the page changes are retried)."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if value := check():
                return value
        except WebDriverException as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout:.0f}s" + (f" ({last})" if last else ""))


def sign_in(driver, gateway_root: str, key: str) -> None:
    """Open /gateway/ and sign in with `key` as a person types it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.get(gateway_root + "/gateway/")
    field = wait_for(lambda: driver.find_element(By.ID, "key"), what="the sign-in field")
    field.send_keys(key, Keys.ENTER)


def shown(driver, element_id: str) -> bool:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).is_displayed()


def table(driver, element_id: str) -> list[list[str]]:
    """The rows of a table's body as the page shows them (cell texts)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f"#{element_id} tbody tr")
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in rows]


def screenshot(driver, name: str) -> Path:
    """The whole page as PNG in SCREENSHOTS/<name>.png."""
    from selenium.webdriver.common.by import By

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(driver.get_window_size()["width"], max(int(height) + 40, 600))
    path = SCREENSHOTS / f"{name}.png"
    driver.find_element(By.TAG_NAME, "body").screenshot(str(path))
    return path


def page_states(driver) -> dict[str, str]:
    """Each model's state as the admin's view shows it (its row's state word)."""
    return driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#stack tbody tr')]"
        ".map(tr => [tr.dataset.model, tr.querySelector('[data-state]').dataset.state]))"
    )


WRONG_KEY_LOGGED = "/gateway/me - Failed to load resource: the server responded with a status of 401"


def page_errors(driver, expected: tuple[str, ...] = ()) -> list[str]:
    """What the browser's console logged as errors (a script error, a Content-Security-Policy violation, a file that
    did not load), but those `expected` (a wrong key's 401: WRONG_KEY_LOGGED)."""
    logged = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    return [m for m in logged if not any(e in m for e in expected)]

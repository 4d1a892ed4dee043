"""Screenshots of the built site, page by page, as a newcomer sees it (``make docs-look``).

Opens ``docs/_build/html`` in headless Chromium at a laptop's width and writes one full-page
PNG per page to ``docs/_build/look/``: the home page, every user-guide page, the gallery's
index and every example, and the API page of every public class. For each page it also
prints what a reader would trip over and a screenshot may hide:

* ``wide code``: code blocks and printed outputs that need a horizontal scroll bar;
* ``overflow``: elements (a formula, a table, a card title) wider than the column they sit
  in, so that their right edge is cut off or runs under the sidebar;
* ``lists``: ordered lists numbered with letters, as reStructuredText makes of a line that
  starts with an initial ("D. W. Scott ..." becomes a list item "W. Scott");
* ``small text``: the height in CSS pixels of the smallest legend or tick text in the page's
  figures cannot be measured from HTML, so each figure's displayed width is printed instead
  (a figure shown much narrower than it was drawn has shrunk its text with it).

Chromium is driven through its DevTools protocol over a pipe (``--remote-debugging-pipe``),
which needs nothing beyond the standard library. Usage::

    python docs/look.py [--site docs/_build/html] [--out docs/_build/look] [--width 1280]
                        [PAGE ...]

where each PAGE (optional) is a path relative to the site, e.g. ``user_guide/kernels.html``.
"""

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Measured in the page once its formulas are typeset; returns a JSON-able summary.
_INSPECT = r"""
(() => {
  const article = document.querySelector('.bd-article') || document.body;
  const column = article.getBoundingClientRect();
  const inline = el => getComputedStyle(el).display.startsWith('inline');
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const text = el => (el.textContent || el.getAttribute('alt') || '').trim()
    .replace(/\s+/g, ' ').slice(0, 60);
  // Code and outputs: the longest line against the characters the box shows.
  const wideCode = [];
  for (const pre of document.querySelectorAll('pre')) {
    if (pre.scrollWidth <= pre.clientWidth + 1) continue;
    const lines = pre.textContent.split('\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    const fits = Math.floor(pre.clientWidth / (pre.scrollWidth / longest.length));
    wideCode.push(`${longest.length} chars > ${fits}: ${longest.trim().slice(0, 50)}`);
  }
  // Anything hanging past the column, or wider than its own box (cut off, or behind a
  // scroll bar the reader may not notice: a formula, a table).
  const overflow = [];
  for (const el of article.querySelectorAll(
      'mjx-container, table, .sphx-glr-thumbcontainer, .sphx-glr-thumbnail-title,'
      + ' img, h1, h2, h3, dt, p, dd')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    if (r.right > column.right + 1) {
      overflow.push(`${el.tagName.toLowerCase()} past the column: ${text(el)}`);
    } else if (!inline(el) && el.scrollWidth > el.clientWidth + 1
               && !(el.tagName === 'MJX-CONTAINER' && el.getAttribute('display') !== 'true')) {
      overflow.push(`${el.tagName.toLowerCase()} ${scrolls(el) ? 'scrolls' : 'cut off'}: `
                    + text(el));
    }
  }
  // Titles broken inside a word: a line break between two letters.
  const brokenTitles = [];
  for (const h of article.querySelectorAll('h1, .sphx-glr-thumbnail-title')) {
    const walker = document.createTreeWalker(h, NodeFilter.SHOW_TEXT);
    let previous = null;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        const c = node.data[i];
        if (previous && rect.top > previous.top + 2 && /\w/.test(previous.c) && /\w/.test(c)) {
          brokenTitles.push(text(h));
        }
        if (rect.height > 0) previous = {top: rect.top, c};
      }
    }
  }
  const lists = [...article.querySelectorAll('ol.loweralpha, ol.upperalpha')]
    .map(o => text(o));
  const figures = [...article.querySelectorAll('img.sphx-glr-single-img, img.sphx-glr-multi-img')]
    .map(i => `${i.getAttribute('src').split('/').pop()} shown ${Math.round(i.width)}px`
              + ` of ${i.naturalWidth}px`);
  return JSON.stringify({wideCode, overflow, brokenTitles: [...new Set(brokenTitles)], lists,
                         figures, height: document.documentElement.scrollHeight});
})()
"""

# Resolves once MathJax (if the page loads it) has typeset every formula.
_TYPESET = r"""
new Promise(resolve => {
  const done = () => setTimeout(resolve, 200);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    MathJax.startup.promise.then(done, done);
  } else { done(); }
})
"""


def pages(site):
    """The pages a newcomer reads, in reading order."""
    listed = [site / "index.html"]
    guide = site / "user_guide"
    listed += [guide / "index.html"] + sorted(p for p in guide.glob("*.html")
                                              if p.name != "index.html")
    gallery = site / "auto_examples"
    listed += [gallery / "index.html"] + sorted(gallery.glob("plot_*.html"))
    listed += [site / "api.html"]
    # The API page of every public class (functions and constants are left out).
    import importlib

    for path in sorted((site / "generated").glob("*.html")):
        module, _, name = path.stem.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if isinstance(obj, type):
            listed.append(path)
    return listed


class Chromium:
    """A headless Chromium driven by DevTools protocol messages over a pipe."""

    def __init__(self, width, height=900):
        binary = next((shutil.which(b) for b in ("chromium", "chromium-browser",
                                                 "google-chrome") if shutil.which(b)), None)
        if binary is None:
            sys.exit("docs/look.py needs Chromium on PATH (apt-get install chromium)")
        self._profile = tempfile.TemporaryDirectory()
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium reads commands on fd 3 and writes answers on fd 4.

        def pipe_fds():
            # Moved out of the way first, so that neither lands on the other's number;
            # dup2 makes 3 and 4 inheritable (Python's own descriptors are not).
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self._proc = subprocess.Popen(
            [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
             "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--allow-file-access-from-files", f"--user-data-dir={self._profile.name}",
             "about:blank"],
            close_fds=False, preexec_fn=pipe_fds, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer, self._id, self._events = b"", 0, []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target,
                                  flatten=True)["sessionId"]
        self.send("Page.enable", session=True)
        self.width = width
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)

    def _read(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, session=False, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self._events.append(answer)

    def wait_for(self, event):
        while True:
            while self._events:
                if self._events.pop(0).get("method") == event:
                    return
            self._events.append(self._read())

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", session=True, expression=expression,
                           awaitPromise=True, returnByValue=True)
        return result["result"].get("value")

    def look(self, url, png):
        self._events.clear()
        self.send("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        self.evaluate(_TYPESET)
        found = json.loads(self.evaluate(_INSPECT))
        metrics = self.send("Page.getLayoutMetrics", session=True)
        height = metrics["cssContentSize"]["height"]
        shot = self.send("Page.captureScreenshot", session=True, format="png",
                         captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": self.width, "height": height,
                               "scale": 1})
        png.write_bytes(base64.b64decode(shot["data"]))
        return found

    def close(self):
        try:
            self.send("Browser.close")
        except RuntimeError:
            pass
        self._proc.wait(timeout=30)
        self._profile.cleanup()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=HERE / "_build" / "html")
    parser.add_argument("--out", type=Path, default=HERE / "_build" / "look")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("pages", nargs="*", help="paths relative to the site")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    if not (site / "index.html").exists():
        sys.exit(f"no site in {site}: build it first (make docs)")
    todo = [site / p for p in args.pages] if args.pages else pages(site)
    args.out.mkdir(parents=True, exist_ok=True)
    browser = Chromium(args.width)
    flagged = 0
    try:
        for page in todo:
            relative = page.relative_to(site)
            png = args.out / (str(relative.with_suffix("")).replace("/", "--") + ".png")
            found = browser.look(page.as_uri(), png)
            problems = {k: found[k] for k in ("wideCode", "overflow", "brokenTitles", "lists")
                        if found[k]}
            flagged += bool(problems)
            print(f"{relative}  ({found['height']} px)  -> {png.name}")
            for kind, items in problems.items():
                print(f"    {kind}: {len(items)}")
                for item in items[:8]:
                    print(f"        {item!r}")
            for figure in found["figures"]:
                print(f"    figure {figure}")
    finally:
        browser.close()
    print(f"{len(todo)} pages, {flagged} with something to look at; PNGs in {args.out}")


if __name__ == "__main__":
    main()

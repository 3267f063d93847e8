"""The Python predecessor's per-call work, as a load generator for bench/run.py.

    py_client.py json URL CA CONCURRENCY SECONDS   curl_cffi fetch + json.loads + json.dumps
    py_client.py html URL CA CONCURRENCY SECONDS   curl_cffi fetch + lxml parse + field extraction

Prints one JSON line: calls, errors, secs, calls_per_sec, p50_ms, p99_ms, client_cpu_s.
"""

import asyncio
import json
import resource
import sys
import time

import lxml.html
from curl_cffi.requests import AsyncSession


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def work_json(body):
    data = json.loads(body)
    reviews = data["reviews"]
    if not reviews:
        raise ValueError("no reviews")
    return json.dumps({"reviews": reviews})


def text(el, xp):
    found = el.xpath(xp)
    return " ".join(found[0].text_content().split()) if found else None


def work_html(body):
    doc = lxml.html.fromstring(body)
    reviews = []
    for r in doc.xpath('//div[contains(concat(" ", normalize-space(@class), " "), " review ")]'):
        rating = text(r, './/*[contains(@class, "review-rating")]')
        reviews.append(
            {
                "id": r.get("data-review-id"),
                "author": text(r, './/*[contains(@class, "review-author")]'),
                "rating": int(float(rating.split()[0])) if rating else None,
                "title": text(r, './/*[contains(@class, "review-title")]'),
                "body": text(r, './/*[contains(@class, "review-body")]'),
                "date": text(r, './/*[contains(@class, "review-date")]'),
                "verified": bool(r.xpath('.//*[contains(@class, "review-verified")]')),
            }
        )
    if not reviews:
        raise ValueError("no reviews")
    return json.dumps({"reviews": reviews})


async def main():
    mode, url, ca, concurrency, seconds = sys.argv[1:6]
    concurrency, seconds = int(concurrency), float(seconds)
    work = work_json if mode == "json" else work_html
    lat, errors = [], [0]
    stop = [False]
    async with AsyncSession(impersonate="chrome", verify=ca, max_clients=concurrency) as s:

        async def one():
            r = await s.get(url)
            if r.status_code != 200:
                raise ValueError(f"HTTP {r.status_code}")
            work(r.content)

        # Warm-up: connections.
        await asyncio.gather(*(one() for _ in range(concurrency)))

        async def worker():
            while not stop[0]:
                t = time.perf_counter()
                try:
                    await one()
                    lat.append((time.perf_counter() - t) * 1e3)
                except Exception:  # counted, the run goes on
                    errors[0] += 1

        cpu0, t0 = cpu_seconds(), time.perf_counter()
        tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await asyncio.sleep(seconds)
        stop[0] = True
        await asyncio.gather(*tasks)
        secs, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, round((len(lat) - 1) * p))] if lat else 0.0

    print(
        json.dumps(
            {
                "calls": len(lat),
                "errors": errors[0],
                "secs": secs,
                "calls_per_sec": len(lat) / secs,
                "p50_ms": pct(0.5),
                "p99_ms": pct(0.99),
                "client_cpu_s": cpu,
            }
        )
    )


asyncio.run(main())

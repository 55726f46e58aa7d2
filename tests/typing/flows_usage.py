"""Type-checked by mypy in CI (not run): the flows API from handler code, without casts."""

from echomq import App, current_job
from echomq.tasks.canvas import Flow, chain, flow, group
from echomq.verbs.flows import Child

app = App("valkey://127.0.0.1:6379/0")


@app.task(queue="pages")
def fetch(page: int) -> int:
    return page


@app.task(queue="reports")
def report(month: str) -> int:
    kids: list[Child] = current_job().children()
    return sum(int(k.value) for k in kids if k.state == "completed")


@app.task(queue="reports")
async def areport(month: str) -> int:
    kids = await current_job().achildren()
    return len(kids)


root: str = app.flow(report.s("2026-11"), children=[fetch.s(p) for p in range(3)])
tree: Flow = flow(report.s("x"), [flow(areport.s("y"), [fetch.s(1).on_failure("ignore")])])
chained: str = chain(fetch.s(1), fetch.s(), report.s()).enqueue()
fan_in: Flow = group(*(fetch.s(p) for p in range(3))).then(report.s())

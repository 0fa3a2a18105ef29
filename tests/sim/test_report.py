"""`simulate --report`: the self-contained HTML page (sim/report.py) and the text cost table's one row per time."""

from html.parser import HTMLParser



from karpenter_lambda.cli.main import main
from karpenter_lambda.cli.simulate import _last_per_time, cost_table
from karpenter_lambda.sim.report import lifelines, render_report

EVIL = "<script>alert('x')</script> & \"quoted\""

RESULT = {
    "nodeClaims": [{"name": "default-b", "nodePool": "default", "instanceType": "m5.large", "zone": "us-east-1a",
                    "capacityType": "on-demand", "pricePerHour": 0.096, "nodeName": "ip-10-0-0-2", "pods": ["default/web-1"]}],
    "unschedulable": [],
    "costPerHour": 0.096,
    "events": [
        {"time": 0.0, "type": "NodeClaimLaunched", "object": "nodeclaim/default-a", "message": "c5.xlarge on-demand"},
        {"time": 30.0, "type": "NodeClaimRegistered", "object": "nodeclaim/default-a", "message": "node ip-10-0-0-1 registered"},
        {"time": 45.0, "type": "NodeReady", "object": "node/ip-10-0-0-1", "message": "kubelet Ready"},
        {"time": 600.0, "type": "NodeClaimDisrupted", "object": "nodeclaim/default-a", "message": "Underutilized: c5.xlarge",
         "reason": "Underutilized", "nodePool": "default"},
        {"time": 600.0, "type": "NodeClaimLaunched", "object": "nodeclaim/default-b", "message": "m5.large replacing default-a",
         "replaces": ["default-a"], "reason": "Underutilized"},
        {"time": 645.0, "type": "NodeClaimInitialized", "object": "nodeclaim/default-b", "message": "node ip-10-0-0-2 initialized"},
        {"time": 700.0, "type": "NodeClaimDeleted", "object": "nodeclaim/default-a", "message": "Underutilized"},
        {"time": 701.0, "type": "PodEvicted", "object": "pod/default/web-1", "message": EVIL},
    ],
    "simulatedSeconds": 900.0,
    "pods": {"total": 1, "bound": 1},
    "stoppedBecause": "nothing left to do",
    "costTimeline": [{"time": 0.0, "costPerHour": 0.17, "nodes": 1}, {"time": 600.0, "costPerHour": 0.266, "nodes": 2},
                     {"time": 700.0, "costPerHour": 0.096, "nodes": 1}],
    "workloads": [], "startTime": "2026-01-01T00:00:00Z", "offpeak": [],
}


class _Page(HTMLParser):
    """Collects what the assertions need: svgs, their polylines, lifeline groups, event rows, URLs, text."""

    def __init__(self):
        super().__init__()
        self.svgs, self.polylines, self.lifelines, self.urls, self.scripts = [], [], [], [], 0
        self.event_rows, self.text = 0, []
        self._svg = None
        self._in_events = self._in_tbody = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href", "xlink:href"):
            if a.get(k):
                self.urls.append(a[k])
        if tag == "script":
            self.scripts += 1
        if tag == "svg":
            self._svg = a.get("id")
            self.svgs.append(self._svg)
        if tag == "polyline":
            self.polylines.append((self._svg, a.get("class"), a.get("points", "")))
        if tag == "g" and "lifeline" in (a.get("class") or "").split():
            self.lifelines.append((a.get("data-nodeclaim"), a.get("data-reason")))
        if tag == "table" and a.get("id") == "events":
            self._in_events = True
        if tag == "tbody" and self._in_events:
            self._in_tbody = True
        if tag == "tr" and self._in_tbody:
            self.event_rows += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_events = self._in_tbody = False

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


def test_report_structure():
    page = render_report(RESULT)
    p = _parse(page)
    assert page.startswith("<!DOCTYPE html>")
    # the chart: one svg, a cost and a nodes polyline with one point per costTimeline entry
    assert p.svgs.count("cost-chart") == 1
    chart = {cls: pts for svg, cls, pts in p.polylines if svg == "cost-chart"}
    assert set(chart) == {"cost", "nodes"}
    for pts in chart.values():
        assert len(pts.split()) == len(RESULT["costTimeline"])
    # highest cost (0.266 at t=600) is the topmost point (smallest y)
    ys = [float(xy.split(",")[1]) for xy in chart["cost"].split()]
    assert ys.index(min(ys)) == 1
    # one lifeline per NodeClaim, the disrupted one with its reason
    assert sorted(p.lifelines) == [("default-a", "Underutilized"), ("default-b", "")]
    assert "default-a (Underutilized)" in "".join(p.text)
    # events table: one row per event
    assert p.event_rows == len(RESULT["events"])
    # self-contained: no script, no external URL
    assert p.scripts == 0
    assert not [u for u in p.urls if u.startswith(("http://", "https://", "//"))]
    assert "http://" not in page and "https://" not in page
    # the message's markup is escaped: it is text, not a tag
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert EVIL in "".join(p.text)


def test_lifelines_times():
    rows = {r["name"]: r for r in lifelines(RESULT)}
    a, b = rows["default-a"], rows["default-b"]
    assert (a["launched"], a["ready"], a["disrupted"], a["reason"], a["deleted"]) == (0.0, 45.0, 600.0, "Underutilized", 700.0)
    assert (b["launched"], b["ready"], b["disrupted"], b["deleted"]) == (600.0, 645.0, None, None)


def test_empty_result_renders():
    p = _parse(render_report({"events": [], "costTimeline": []}))
    assert p.svgs == ["cost-chart", "lifelines"] and p.event_rows == 0 and p.lifelines == []


def test_cost_table_one_row_per_time():
    tl = [{"time": 0.0, "costPerHour": 0.1, "nodes": 1}, {"time": 30.0, "costPerHour": 0.2, "nodes": 2},
          {"time": 30.0, "costPerHour": 0.3, "nodes": 3}, {"time": 60.0, "costPerHour": 0.1, "nodes": 1}]
    assert _last_per_time(tl) == [tl[0], tl[2], tl[3]]
    rows = cost_table(tl).splitlines()[1:]
    rows = [r for r in rows if r.strip() and not set(r.strip()) <= set("-+ ")]
    assert [r.split() for r in rows] == [["+0.0s", "1", "$0.1000"], ["+30.0s", "3", "$0.3000"], ["+1m00.0s", "1", "$0.1000"]]


SCENARIO = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-sim
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - {name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}
"""


def test_cli_report_written(tmp_path, capsys):
    src = tmp_path / "scenario.yaml"
    src.write_text(SCENARIO)
    out = tmp_path / "out.html"
    code = main(["simulate", str(src), "--until", "2m", "--quiet", "--report", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert f"report written to {out}" in captured.err
    # the text cost table: one row per distinct time
    lines = captured.out.split("Cost over time\n", 1)[1].split("\n\n", 1)[0].splitlines()
    times = [ln.split()[0] for ln in lines[1:] if ln.strip() and not set(ln.strip()) <= set("-+ ")]
    assert times and len(times) == len(set(times))
    p = _parse(out.read_text())
    assert p.svgs.count("cost-chart") == 1 and len(p.lifelines) >= 1
    assert p.event_rows > 0 and not [u for u in p.urls if "://" in u]


def test_cli_report_unwritable_path_exit_2(tmp_path, capsys):
    src = tmp_path / "scenario.yaml"
    src.write_text(SCENARIO)
    code = main(["simulate", str(src), "--until", "10s", "--quiet", "--report", str(tmp_path / "no-such-dir" / "r.html")])
    assert code == 2
    assert "--report: cannot write" in capsys.readouterr().err
    assert main(["simulate", str(src), "--quiet", "--report", str(tmp_path)]) == 2   # a directory
    assert "is a directory" in capsys.readouterr().err

"""`installed(name)`, the source both engine probes (jobs/engines/probe.py, the version;
jobs/engines/fingerprint.py, the host's versions) run in an engine's interpreter: the
distribution that `import name` loads, when its metadata lies beside the package, else None (a
source folder on PYTHONPATH, an editable install, the test stand-in: the probe imports the
package then). importlib.metadata, most of a probe's time, is imported only when a folder on the
package's path entry is named like the package: a source tree's probe takes a third of the CPU.
"""

INSTALLED = """\
import importlib.util as u, os
def installed(name):
    try:
        spec = u.find_spec(name)
    except Exception:
        return None
    if spec is None or not spec.origin:
        return None
    key = name.lower().replace("-", "_").replace(".", "_")
    try:
        entries = os.listdir(os.path.dirname(os.path.dirname(spec.origin)))
    except OSError:
        return None
    named = [e[:-len(".dist-info")] if e.endswith(".dist-info") else e[:-len(".egg-info")]
             for e in entries if e.endswith((".dist-info", ".egg-info"))]
    if not any(n.split("-")[0].lower().replace(".", "_") == key for n in named):
        return None
    import importlib.metadata as m
    try:
        dist = m.distribution(name)
        init = os.path.realpath(str(dist.locate_file(name + "/__init__.py")))
    except Exception:
        return None
    return dist if os.path.realpath(spec.origin) == init else None
"""

"""The README's quick start, as a script (used by scripts/pg15-check.sh)."""

from primitives._project import migrate
from primitives.engine import Engine
from primitives.spec import load_spec

spec = load_spec("agents/spectral_agent.yaml")
migrate([spec])

with Engine.connect(spec) as engine:
    with engine.tenant({"workspace_id": "ws-acme"}) as mem:
        mem.observe("cycle", "Lowering temperature to 0.2 removed fabrication.",
                    scope_id="cycle-41", envelope={"kind": "scan_observation"})
        mem.observe("workspace", "Prefers concise distillation outputs.",
                    typology="procedural", key="distillation-style")
        hits = mem.search("temperature fabrication")
        for hit in hits:
            print(hit.memory.tier, hit.score, hit.ranks)
        assert hits, "no hit for tenant ws-acme"
    with engine.tenant({"workspace_id": "ws-globex"}) as mem:
        assert mem.search("temperature fabrication") == []
    engine.observe({"workspace_id": "ws-acme"}, "cycle", "Retrieval returned stale context.")
    print("stale context:", [h.memory.content for h in
                             engine.search({"workspace_id": "ws-acme"}, "stale context")])
print("quick start: ok")

import { describe, expect, it } from "vitest";
import { whatHappensNext } from "../../src/runtime/liveness.js";

const runtime = { workerId: "box:41:abcdef", host: "box", pid: 41, agent: "napper@1", recoversEveryMs: null };

describe("what happens next to a waiting run", () => {
  it("names the live runtime that wakes it when it is due, and says so when none is live", () => {
    const live = whatHappensNext({ status: "waiting", agent: "napper@1", owner: null, runtimes: [runtime] });
    expect(live).toMatchObject({ live: true });
    expect(live.text).toBe('the run waits; box pid 41 (agent "napper@1", live now) wakes it when it is due');
    const none = whatHappensNext({ status: "waiting", agent: "napper@1", owner: null, runtimes: [] });
    expect(none).toMatchObject({ live: false });
    expect(none.text).toContain('no runtime with agent "napper@1" is live now: when it is due');
  });
});

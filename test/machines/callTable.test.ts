import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type CallState, CallTable } from "../../src/machines/index.js";

const call = (callId: string, status: CallState["status"] = "in-doubt"): CallState => ({
  callId,
  seq: Number(callId.split("/").at(-1)) || 0,
  attempt: 1,
  kind: "tool",
  name: "t",
  fingerprint: "f",
  disposition: "hold",
  pin: null,
  reconciler: null,
  status,
  via: null,
  resultDigest: null,
  retriesLeft: 0,
});

describe("CallTable: the run context's calls", () => {
  it("behaves as a map from call id to call, in the order calls came, and never changes a table it was made from", () => {
    const ids = fc.oneof(
      fc.integer({ min: 0, max: 300 }).map((seq) => `run-a/${seq}`),
      fc.constantFrom("run-b/1", "odd", "run-a/01", "run-a/-1", "run-a/9999999", "/3"),
    );
    const status = fc.constantFrom("in-doubt", "completed") as fc.Arbitrary<CallState["status"]>;
    const first = fc.tuple(
      fc.integer({ min: 0, max: 300 }).map((seq) => `run-a/${seq}`),
      status,
    );
    fc.assert(
      fc.property(first, fc.array(fc.tuple(ids, status), { maxLength: 400 }), (head, rest) => {
        const writes = [head, ...rest];
        let table = CallTable.empty;
        const model = new Map<string, CallState>();
        const before: Array<{ table: CallTable; snapshot: Map<string, CallState> }> = [];
        for (const [id, status] of writes) {
          before.push({ table, snapshot: new Map(model) });
          table = table.with(call(id, status));
          model.set(id, call(id, status));
        }
        expect(table.size).toBe(model.size);
        for (const [id, value] of model) expect(table.get(id)).toEqual(value);
        expect(table.get("never")).toBeUndefined();
        // Every earlier table still holds exactly what it held.
        for (const { table: old, snapshot } of before) {
          expect(old.size).toBe(snapshot.size);
          for (const [id, value] of snapshot) expect(old.get(id)).toEqual(value);
        }
        // The run's own ids (the first call's run) in seq order, then the others as they first came.
        const own = (id: string) => /^run-a\/(0|[1-9][0-9]{0,5})$/.test(id);
        const mine = [...model.keys()]
          .filter(own)
          .sort((x, y) => Number(x.split("/")[1]) - Number(y.split("/")[1]));
        const others = [...model.keys()].filter((id) => !own(id));
        expect(table.values().map((c) => c.callId)).toEqual([...mine, ...others]);
        expect(Object.keys(table.toJSON()).sort()).toEqual([...model.keys()].sort());
      }),
      { numRuns: 300, seed: 20261203 },
    );
  });

  it("recording a call in a table of 10,000 copies one chunk, not every call", () => {
    let table = CallTable.empty;
    for (let seq = 0; seq < 10_000; seq++) table = table.with(call(`r/${seq}`));
    const next = table.with(call("r/5000", "completed"));
    // The chunks the change did not touch are the very same arrays.
    const chunksOf = (t: CallTable) => (t as unknown as { chunks: ReadonlyArray<unknown> }).chunks;
    const shared = chunksOf(next).filter((chunk, i) => chunk === chunksOf(table)[i]).length;
    expect(shared).toBe(chunksOf(table).length - 1);
    expect(next.get("r/5000")?.status).toBe("completed");
    expect(table.get("r/5000")?.status).toBe("in-doubt");
  });
});

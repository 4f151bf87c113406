import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { FastCheck as fc } from "effect";
import { describe, expect, it } from "vitest";
import { temporarySpill } from "../../src/adapters/stores/libsql/temporarySpill.js";
import { type AuditSpill, memorySpill } from "../../src/runtime/audit.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

type Op =
  | { readonly op: "put"; readonly space: string; readonly key: string; readonly value: string }
  | { readonly op: "get"; readonly space: string; readonly key: string }
  | { readonly op: "take"; readonly space: string; readonly keys: ReadonlyArray<string> }
  | { readonly op: "drain"; readonly space: string };

const apply = (spill: AuditSpill, ops: ReadonlyArray<Op>): unknown[] =>
  ops.map((o) => {
    if (o.op === "put") {
      spill.put(o.space, o.key, o.value);
      return null;
    }
    if (o.op === "get") return spill.get(o.space, o.key);
    if (o.op === "take") return [...spill.take(o.space, o.keys)].sort();
    return [...spill.drain(o.space)];
  });

const space = fc.constantFrom("rows:runs", "rows:calls", "laws");
const key = fc.constantFrom("", "a", "b", "a/1", "a/10", "é", "z");
const value = fc.constantFrom("", "x", '{"a":1}', "line\nbreak", "é€😀");
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("put" as const), space, key, value }),
  fc.record({ op: fc.constant("put" as const), space, key, value }),
  fc.record({ op: fc.constant("get" as const), space, key }),
  fc.record({ op: fc.constant("take" as const), space, keys: fc.array(key, { maxLength: 4 }) }),
  fc.record({ op: fc.constant("drain" as const), space }),
);

describe("the temporary spill (adapters)", () => {
  it("answers every put, get, take and drain as the memory spill does, before and after it moves to its file, sealed or not", () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 40 }),
        fc.integer({ min: 0, max: 6 }),
        fc.boolean(),
        (ops, limit, seal) => {
          const expected = apply(memorySpill(), ops);
          const spill = temporarySpill({ memoryEntries: limit, seal, dir: tempDir() });
          try {
            expect(apply(spill, ops)).toEqual(expected);
          } finally {
            spill.close();
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it("writes its file in a fresh folder, sealed values never in the clear, and removes the folder on close", () => {
    const dir = tempDir();
    const secret = "checkpoint-state-in-the-clear";
    for (const seal of [false, true]) {
      const spill = temporarySpill({ memoryEntries: 0, seal, dir });
      for (let n = 0; n < 50; n++) spill.put("rows:chats", `chat-${n}`, `{"state":"${secret}-${n}"}`);
      expect(spill.take("rows:chats", ["chat-7"]).get("chat-7")).toBe(`{"state":"${secret}-7"}`);
      const [folder] = readdirSync(dir);
      expect(folder).toMatch(/^holdfast-audit-/);
      const bytes = readFileSync(join(dir, folder!, "spill.db")).toString("latin1");
      expect(bytes.includes(secret)).toBe(!seal);
      spill.close();
      expect(existsSync(join(dir, folder!))).toBe(false);
    }
  });

  it("stays in memory below its threshold: no file is made", () => {
    const dir = tempDir();
    const spill = temporarySpill({ memoryEntries: 10, dir });
    for (let n = 0; n < 10; n++) spill.put("laws", `run-${n}`, "{}");
    expect(readdirSync(dir)).toEqual([]);
    spill.put("laws", "run-10", "{}");
    expect(readdirSync(dir)).toHaveLength(1);
    spill.close();
    expect(readdirSync(dir)).toEqual([]);
  });
});

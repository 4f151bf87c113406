import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { ActiveRunExists, defineAgent, InputConflict, openRuntime } from "../../src/index.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** An agent that stays active until released, so a second input meets an active run. */
const gated = () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const agent = defineAgent({
    name: "gated",
    version: "1",
    run: async (turn, input: string) => {
      await turn.model("wait", {}, async () => {
        await gate;
        return "go";
      });
      return input;
    },
  });
  return { agent, release: () => release() };
};

const eventCount = (db: string) => {
  const journal = LibsqlJournal.open(db);
  const n = (journal.unsafeDatabase().prepare("SELECT count(*) AS n FROM events").get() as { n: number }).n;
  void journal.close();
  return Number(n);
};

describe("law 6 — idempotent admission", () => {
  it("the same (chatId, inputId) and content returns the same run with no new work", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const { agent, release } = gated();
    const rt = await openRuntime({ store: db, agents: [agent] });
    const first = await rt.submit({ chatId: "c", inputId: "m1", agent: "gated", content: "hello" });
    const second = await rt.submit({ chatId: "c", inputId: "m1", agent: "gated", content: "hello" });
    expect(first.reused).toBe(false);
    expect(second).toMatchObject({ runId: first.runId, reused: true });
    release();
    expect(await second.result).toEqual(await first.result);
    const types = (await rt.events(first.runId)).map((e) => e.event.type);
    expect(types.filter((t) => t === "run.admitted")).toHaveLength(1);
    await rt.close();
  });

  it("the same ids with different content are refused with InputConflict and write nothing", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const { agent, release } = gated();
    const rt = await openRuntime({ store: db, agents: [agent] });
    const first = await rt.submit({ chatId: "c", inputId: "m1", agent: "gated", content: "hello" });
    release();
    await first.result;
    await rt.close();
    const before = eventCount(db);
    const again = await openRuntime({ store: db, agents: [agent] });
    const refused = again.submit({ chatId: "c", inputId: "m1", agent: "gated", content: "HELLO" });
    await expect(refused).rejects.toBeInstanceOf(InputConflict);
    await expect(refused).rejects.toMatchObject({ chatId: "c", inputId: "m1", runId: first.runId });
    await again.close();
    expect(eventCount(db)).toBe(before);
  });

  it("a second input while the chat has an active run is refused with ActiveRunExists naming that run", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const { agent, release } = gated();
    const rt = await openRuntime({ store: db, agents: [agent] });
    const first = await rt.submit({ chatId: "c", inputId: "m1", agent: "gated", content: "one" });
    const refused = rt.submit({ chatId: "c", inputId: "m2", agent: "gated", content: "two" });
    await expect(refused).rejects.toBeInstanceOf(ActiveRunExists);
    await expect(refused).rejects.toMatchObject({ chatId: "c", runId: first.runId });
    // Other chats are not affected.
    const other = await rt.submit({ chatId: "d", inputId: "m1", agent: "gated", content: "x" });
    release();
    await Promise.all([first.result, other.result]);
    // Once the run finished, the chat takes new input.
    const next = await rt.submit({ chatId: "c", inputId: "m2", agent: "gated", content: "two" });
    expect(next.reused).toBe(false);
    await next.result;
    await rt.close();
  });

  it("two OS processes submitting to one chat at the same moment: exactly one is admitted, the other gets ActiveRunExists, no SQLITE_BUSY", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    // Create the journal first so both processes race on admission, not on creation.
    await (await openRuntime({ store: db })).close();
    const startAt = String(Date.now() + 1500);
    const common = {
      HF_DB: db,
      HF_WITNESS: witness,
      HF_ACTION: "submit",
      HF_CHAT: "shared",
      HF_START_AT: startAt,
      HF_HOLD_MS: "1500",
    };
    const [a, b] = await Promise.all([
      runWorker({ ...common, HF_INPUT: "from-a", HF_PREFIX: "a" }),
      runWorker({ ...common, HF_INPUT: "from-b", HF_PREFIX: "b" }),
    ]);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    const outcomes = [a, b].map((r) =>
      lineOf(r, "result") ? "admitted" : (lineOf(r, "error")?.tag as string),
    );
    expect(outcomes.sort()).toEqual(["ActiveRunExists", "admitted"]);
    const winner = [a, b].find((r) => lineOf(r, "result"))!;
    const loser = [a, b].find((r) => lineOf(r, "error"))!;
    expect(lineOf(loser, "error")?.runId).toBe(lineOf(winner, "submitted")?.runId);
    expect(`${a.stderr}${b.stderr}${JSON.stringify(a.lines)}${JSON.stringify(b.lines)}`).not.toMatch(
      /SQLITE_BUSY|locked/i,
    );
  });
});

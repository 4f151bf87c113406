import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { DocumentConflict, defineAgent, openRuntime, type PlanValue } from "../../src/index.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const plan = (n: number, text = "step"): PlanValue => ({
  title: "Ship the report",
  items: Array.from({ length: n }, (_, i) => ({ id: `i${i}`, text: `${text} ${i}`, done: false })),
});

const chatEvents = async (db: string, chatId: string) => {
  const journal = LibsqlJournal.open(db);
  const events = (await journal.readStream(`chat-${chatId}`)).map((e) => e.event);
  await journal.close();
  return events;
};

describe("the durable plan", () => {
  it("the agent reads and replaces the plan; the change and the call's outcome commit together", async () => {
    const db = join(tempDir(), "j.db");
    const agent = defineAgent({
      name: "planner",
      version: "1",
      run: async (turn) => {
        const before = await turn.plan.read();
        const { revision } = await turn.plan.replace(before.revision, plan(2));
        return { before: before.revision, after: revision };
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "planner", content: null });
    expect(await run.result).toMatchObject({ status: "completed", output: { before: 0, after: 1 } });
    expect(await rt.documents.read("c")).toEqual({ value: plan(2), revision: 1 });
    const kinds = (await rt.events(run.runId)).map((e) => e.event).filter((e) => e.type === "call.intended");
    expect(kinds.map((e) => (e.type === "call.intended" ? [e.kind, e.name] : null))).toEqual([
      ["document", "durable_plan"],
      ["document", "durable_plan"],
    ]);
    await rt.close();
  });

  it("a plan of 101 items or more than 64 KiB is refused with a clear error and nothing is written", async () => {
    const db = join(tempDir(), "j.db");
    const rt = await openRuntime({ store: db });
    await expect(
      rt.documents.replace("c", { expectedRevision: 0, value: plan(101), by: "ada" }),
    ).rejects.toThrow(/101 items; a plan holds at most 100/);
    await expect(
      rt.documents.replace("c", { expectedRevision: 0, value: plan(50, "x".repeat(2000)), by: "ada" }),
    ).rejects.toThrow(/bytes encoded; a plan holds at most 65536/);
    let caught: unknown;
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        try {
          await turn.plan.replace(0, plan(101));
        } catch (error) {
          caught = error;
        }
        return null;
      },
    });
    await rt.close();
    const again = await openRuntime({ store: db, agents: [agent] });
    const run = await again.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
    await run.result;
    expect(String(caught)).toMatch(/at most 100/);
    expect((await again.events(run.runId)).map((e) => e.event.type)).not.toContain("call.intended");
    await again.close();
    expect(await chatEvents(db, "c")).toEqual([]);
  });

  it("an agent edit racing a person's edit: one document.conflicted, and no edit is lost", async () => {
    const db = join(tempDir(), "j.db");
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let conflict: unknown;
    const agent = defineAgent({
      name: "racer",
      version: "1",
      run: async (turn) => {
        const current = await turn.plan.read();
        await turn.model("think", {}, async () => {
          await gate;
          return "done thinking";
        });
        try {
          await turn.plan.replace(current.revision, plan(1, "agent"));
          return "agent wrote";
        } catch (error) {
          conflict = error;
          const fresh = await turn.plan.read();
          return { gaveWayTo: fresh.revision };
        }
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "racer", content: null });
    await new Promise((r) => setTimeout(r, 100));
    // The person edits while the agent thinks.
    await rt.documents.replace("c", { expectedRevision: 0, value: plan(1, "person"), by: "ada" });
    release();
    expect(await run.result).toMatchObject({ status: "completed", output: { gaveWayTo: 1 } });
    expect(conflict).toBeInstanceOf(DocumentConflict);
    expect(conflict).toMatchObject({ expected: 0, actual: 1 });
    const events = await chatEvents(db, "c");
    expect(events.map((e) => e.type)).toEqual(["document.replaced", "document.conflicted"]);
    expect((await rt.documents.read("c")).value).toEqual(plan(1, "person"));
    // A person's stale edit is refused the same way.
    await expect(
      rt.documents.replace("c", { expectedRevision: 0, value: plan(3), by: "bob" }),
    ).rejects.toBeInstanceOf(DocumentConflict);
    await rt.close();
  });
});

describe("the durable plan across a crash", () => {
  it("the plan survives a SIGKILL right after it was written, and re-execution does not write it again", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const base = {
      HF_DB: db,
      HF_WITNESS: witness,
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_AGENT: "planning",
    };
    const first = await runWorker({
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "durable_plan",
      HOLDFAST_CRASH_SKIP: "1",
    });
    expect(first.signal).toBe("SIGKILL");
    const second = await runWorker({ ...base, HF_ACTION: "recover" });
    expect(second.code, second.stderr).toBe(0);
    const report = lineOf(second, "recovery")?.report as { resumed: string[]; held: unknown[] };
    // Nothing was in doubt: the plan call's outcome committed with the plan itself.
    expect(report.held).toEqual([]);
    expect(lineOf(second, "recovered")?.results).toEqual([
      expect.objectContaining({ status: "completed", output: { revision: 1 } }),
    ]);
    const chat = await chatEvents(db, "c");
    expect(chat.map((e) => e.type)).toEqual(["document.replaced"]);
    expect(chat[0]).toMatchObject({ revision: 1, value: { title: "plan p" } });
  });
});

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  assertReplayClean,
  defineAgent,
  openReader,
  openRuntime,
  ReplayDiverged,
  replayRuns,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { promptAgent, SECRET, secrets, tools } from "./promptAgent.js";

const tempDir = useTempDir();

/** A journal with one completed run of the writer agent, made by `instruction`'s code. */
const recordRun = async (dir: string, instruction = "Polish it") => {
  const store = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  process.env.HOLDFAST_REPLAY_WITNESS = witness;
  const runtime = await openRuntime({ store, agents: [promptAgent(instruction)], tools, secrets });
  const run = await runtime.submit({
    chatId: "c1",
    inputId: "m1",
    agent: "writer",
    content: { topic: "tides" },
  });
  expect(await run.result).toMatchObject({ status: "completed" });
  await runtime.close();
  return { store, witness, runId: run.runId };
};

/** The journal's head: the audit's digest and last position. */
const head = async (store: string) => {
  const reader = await openReader({ store });
  try {
    const report = await reader.audit();
    expect(report.headDigest).toMatch(/^[0-9a-f]{64}$/);
    return { digest: report.headDigest, position: report.lastPosition };
  } finally {
    await reader.close();
  }
};

describe("replayRuns", () => {
  it("a run replayed with the code that recorded it is the same", async () => {
    const { store, runId } = await recordRun(tempDir());
    const report = await replayRuns({ agents: [promptAgent("Polish it")], tools, secrets, store });
    expect(report.runs).toEqual([{ runId, agent: "writer@1", result: "same", calls: 3 }]);
    expect(report.divergences).toBe(0);
  });

  it("a changed prompt is reported at its call, both arguments masked", async () => {
    const { store, runId } = await recordRun(tempDir());
    const report = await replayRuns({
      agents: [promptAgent("Polish it, and make it shorter")],
      tools,
      secrets,
      store,
    });
    expect(report.divergences).toBe(1);
    const [run] = report.runs;
    expect(run).toMatchObject({ runId, result: "divergence" });
    if (run?.result !== "divergence") throw new Error("no divergence");
    const { divergence } = run;
    expect(divergence.seq).toBe(2);
    expect(divergence.callId).toBe(`${runId}/2`);
    expect(divergence.recorded).toMatchObject({ kind: "model", name: "polish" });
    expect(divergence.now).toMatchObject({ kind: "model", name: "polish" });
    expect(divergence.recorded?.fingerprint).not.toBe(divergence.now?.fingerprint);
    expect(divergence.recorded?.args).toMatchObject({ instruction: "Polish it" });
    expect(divergence.now?.args).toMatchObject({ instruction: "Polish it, and make it shorter" });
    const shown = JSON.stringify(divergence);
    expect(shown).not.toContain(SECRET.value);
    expect(shown).toContain(`«secret:${SECRET.name}»`);
  });

  it("a replay starts no effect and writes nothing to the journal", async () => {
    const { store, witness } = await recordRun(tempDir());
    const before = { head: await head(store), witness: readFileSync(witness, "utf8") };
    for (const instruction of ["Polish it", "another prompt"])
      await replayRuns({ agents: [promptAgent(instruction, true)], tools, secrets, store });
    expect(readFileSync(witness, "utf8")).toBe(before.witness);
    expect(await head(store)).toEqual(before.head);
  });

  it("a completed run whose code now makes more calls than recorded diverges at the first of them", async () => {
    const { store, runId, witness } = await recordRun(tempDir());
    const lines = readFileSync(witness, "utf8");
    const report = await replayRuns({ agents: [promptAgent("Polish it", true)], tools, secrets, store });
    expect(report.runs).toEqual([
      expect.objectContaining({
        runId,
        result: "divergence",
        divergence: expect.objectContaining({
          seq: 3,
          recorded: null,
          detail: expect.stringContaining("the run ended (completed) after its 3 recorded call(s)"),
        }),
      }),
    ]);
    expect(report.divergences).toBe(1);
    expect(readFileSync(witness, "utf8")).toBe(lines);
  });

  it("a run whose agent version is not given cannot be replayed, and says which versions were", async () => {
    const { store } = await recordRun(tempDir());
    const other = { ...promptAgent("Polish it"), version: "2" };
    const report = await replayRuns({ agents: [other], tools, secrets, store });
    expect(report.runs[0]).toMatchObject({
      result: "error",
      detail: expect.stringContaining('versions of "writer" given: 2'),
    });
    expect(existsSync(store)).toBe(true);
  });
});

describe("assertReplayClean", () => {
  it("resolves with the report when every run replays, and throws a readable report when one diverges", async () => {
    const { store, runId } = await recordRun(tempDir());
    await expect(
      assertReplayClean({ agents: [promptAgent("Polish it")], tools, secrets, store }),
    ).resolves.toMatchObject({
      divergences: 0,
    });
    const failing = assertReplayClean({ agents: [promptAgent("Polish it, briefly")], tools, secrets, store });
    await expect(failing).rejects.toBeInstanceOf(ReplayDiverged);
    await expect(failing).rejects.toThrow(`${runId} writer@1: DIVERGES`);
    await expect(failing).rejects.toThrow('now:      model "polish"');
    await expect(failing).rejects.not.toThrow(SECRET.value);
  });
});

describe("replayRuns, how runs end", () => {
  it("an agent that now returns before a recorded call diverges there, with no call now", async () => {
    const { store, runId } = await recordRun(tempDir());
    const shorter = defineAgent({
      name: "writer",
      version: "1",
      run: async (turn, input: { topic: string }) =>
        turn.model("draft", { prompt: `Write about ${input.topic}. Key: ${SECRET.value}` }, async () => "x"),
    });
    const report = await replayRuns({ agents: [shorter], tools, secrets, store });
    expect(report.runs[0]).toMatchObject({
      runId,
      result: "divergence",
      divergence: { seq: 1, recorded: { kind: "tool", name: "note" }, now: null },
    });
  });

  it("a waiting run continues live from its wait", async () => {
    const store = join(tempDir(), "journal.db");
    const sleeper = defineAgent({
      name: "sleeper",
      version: "1",
      run: async (turn) => {
        await turn.model("think", { q: 1 }, async () => "ok");
        await turn.sleep(3_600_000);
        return "awake";
      },
    });
    const runtime = await openRuntime({ store, agents: [sleeper] });
    const run = await runtime.submit({ chatId: "c1", inputId: "m1", agent: "sleeper", content: {} });
    expect(await run.result).toMatchObject({ status: "waiting" });
    await runtime.close();
    const report = await replayRuns({ agents: [sleeper], store });
    expect(report.runs).toEqual([
      expect.objectContaining({ runId: run.runId, result: "continues-live", seq: 1 }),
    ]);
  });
});

describe("replayRuns, choosing runs", () => {
  it("every run is replayed, page after page of the run index, and --status/--since narrow them", async () => {
    const store = join(tempDir(), "journal.db");
    const echo = defineAgent({
      name: "echo",
      version: "1",
      run: async (turn, input: { n: number }) => turn.model("echo", input, async () => input.n),
    });
    const runtime = await openRuntime({ store, agents: [echo] });
    const handles = [];
    for (let n = 0; n < 205; n++)
      handles.push(await runtime.submit({ chatId: `c${n}`, inputId: "m", agent: "echo", content: { n } }));
    await Promise.all(handles.map((h) => h.result));
    await runtime.close();
    const progress: number[] = [];
    const all = await replayRuns({
      agents: [echo],
      store,
      onProgress: ({ done, total }) => progress.push(done, total),
    });
    expect(all.runs).toHaveLength(205);
    expect(new Set(all.runs.map((r) => r.runId))).toEqual(new Set(handles.map((h) => h.runId)));
    expect(all.runs.every((r) => r.result === "same")).toBe(true);
    expect(progress.slice(-2)).toEqual([205, 205]);
    expect((await replayRuns({ agents: [echo], store, status: ["held", "waiting"] })).runs).toEqual([]);
    expect((await replayRuns({ agents: [echo], store, since: new Date(Date.now() + 60_000) })).runs).toEqual(
      [],
    );
  }, 60_000);
});

import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { trace } from "@opentelemetry/api";
import { describe, expect, it, vi } from "vitest";
import { openRuntime, type RuntimeOptions } from "../../src/index.js";
import { runWorker } from "../support/processes.js";
import { makeTableTools, tableAgent } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";
import { fetcherOptions } from "./fetcher.js";
import { childrenOf, runSpans, useInMemoryTracing } from "./support.js";

const exporter = useInMemoryTracing();
const tempDir = useTempDir();

/** Open a runtime on a crashed journal under a caller's span; recover; the resumed run's spans. */
const recoverUnderSpan = (options: RuntimeOptions) =>
  trace.getTracer("test").startActiveSpan("restart", async (caller) => {
    const runtime = await openRuntime(options);
    const [runId] = runtime.recovery.interrupted;
    await runtime.wait(runId!);
    caller.end();
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), runId!)).toHaveLength(1));
    await runtime.close();
    const spans = exporter.getFinishedSpans();
    const run = runSpans(spans, runId!)[0]!;
    return { runId: runId!, run, calls: childrenOf(spans, run), caller };
  });

/** The fetcher SIGKILLed after its safe-listed read ran and before the outcome, then recovered here. */
const crashedFetch = async () => {
  const db = join(tempDir(), "journal.db");
  const first = spawnSync(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "fetcher-worker.ts")],
    {
      env: {
        ...process.env,
        HF_DB: db,
        HOLDFAST_CRASH_AT: "after-effect-before-outcome",
        HOLDFAST_CRASH_CALL: "fetch_page",
      },
      encoding: "utf8",
    },
  );
  expect(first.signal, first.stderr).toBe("SIGKILL");
  return recoverUnderSpan(fetcherOptions(db));
};

/** The table agent SIGKILLed inside `crashCall`, then recovered here. */
const crashedTable = async (crashCall: string) => {
  const dir = tempDir();
  const db = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  const first = await runWorker({
    HF_DB: db,
    HF_WITNESS: witness,
    HF_CHAT: "c",
    HF_INPUT: "i",
    HF_PREFIX: "p",
    HF_AGENT: "table",
    HF_ACTION: "submit",
    HOLDFAST_CRASH_AT: "after-effect-before-outcome",
    HOLDFAST_CRASH_CALL: crashCall,
  });
  expect(first.signal, first.stderr).toBe("SIGKILL");
  return recoverUnderSpan({ store: db, agents: [tableAgent], tools: makeTableTools(witness).all });
};

describe("tracing across a crash", () => {
  it("a run resumed in a new process gets a new run span under the restart's span: taken over, interrupted, the in-doubt call replayed", async () => {
    const { runId, run, calls, caller } = await crashedFetch();
    expect(run.parentSpanContext?.spanId).toBe(caller.spanContext().spanId);
    expect(run.name).toBe("holdfast.run fetcher");
    expect(run.attributes).toMatchObject({
      "holdfast.run.id": runId,
      "holdfast.chat.id": "c",
      "holdfast.agent.name": "fetcher",
      "holdfast.agent.version": "2",
      "holdfast.run.resumed": true,
      "holdfast.run.status": "completed",
    });
    expect(run.events.map((e) => e.name)).toEqual(
      expect.arrayContaining(["holdfast.run.claimed", "holdfast.run.taken_over", "holdfast.run.interrupted"]),
    );
    expect(
      calls.map((s) => [
        s.name,
        s.attributes["holdfast.call.attempt"],
        s.attributes["holdfast.call.outcome"],
      ]),
    ).toEqual([
      ["holdfast.tool fetch_page", 1, "replayed"],
      ["holdfast.tool fetch_page", 2, "completed"],
    ]);
    expect(calls[0]!.attributes).toMatchObject({
      "holdfast.call.id": `${runId}/0`,
      "holdfast.call.seq": 0,
      "holdfast.call.disposition": "replay",
      "holdfast.call.replay_reason": "allowlisted",
    });
  });

  it("an in-doubt call a reconciler proves completed ends with the outcome reconciled", async () => {
    const { calls } = await crashedTable("reconciled");
    expect(calls.map((s) => [s.name, s.attributes["holdfast.call.outcome"]])).toEqual([
      ["holdfast.tool reconciled", "reconciled"],
      ["holdfast.tool record", "completed"],
    ]);
    expect(calls[0]!.attributes).toMatchObject({
      "holdfast.call.disposition": "reconcile",
      "holdfast.call.reconciled": "completed",
    });
  });
});

import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { runStreamId } from "../../../../events/index.js";
import type { RecoveryReport, RunResult } from "../../../../runtime/engine.js";
import { makeShellTool, makeWriteFileTool } from "../../../integrations/tools/index.js";
import { openRuntime } from "../../../openRuntime.js";
import { isPostgresUrl, maskUrl, resolveStore } from "../../../store.js";
import { CliError, ExitCode } from "../CliError.js";
import { makeDemoAgent, SCRIPTED_PLANNER_LABEL } from "../demoAgent.js";
import { brief, eventLine, summarizeEvent } from "../eventFormat.js";
import { makeNotifyTool } from "../notifyTool.js";
import type { Io } from "../Output.js";

export interface DemoOptions {
  readonly db?: string;
  readonly work?: string;
  readonly json?: boolean;
}

/** A made-up key, registered as a secret so the output shows how masking looks. */
export const DEMO_SECRET = { name: "DEMO_API_KEY", value: "demo-secret-value-1234" } as const;

const LEASE_MS = 15_000;

/** Same shape as the library's run ids: time first, so they sort by start. */

const shellQuote = (text: string): string =>
  /^[\w./:@-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;

const recoveryLines = (report: RecoveryReport): string[] => {
  const lines: string[] = [];
  if (report.resumed.length > 0) lines.push(`  resumed: ${report.resumed.join(", ")}`);
  const interrupted = new Set(report.interrupted);
  for (const held of report.held) {
    // A run held by an earlier process is listed too (it still needs a person), but said to be so.
    const label = interrupted.has(held.runId) ? "held" : "still held from before";
    lines.push(
      `  ${label}: ${held.runId} (${held.reasons.map((r) => `${r.callId ?? ""} ${r.code}`.trim()).join(", ")})`,
    );
  }
  if (report.ownedElsewhere.length > 0) {
    lines.push(
      `  left alone, a live worker owns them: ${report.ownedElsewhere.join(", ")} (if that worker is on another host and dead, its ${LEASE_MS / 1000} s lease runs out and the next demo recovers them)`,
    );
  }
  for (const item of report.needsAttention) lines.push(`  needs attention: ${item.runId}: ${item.reason}`);
  return lines;
};

const resultLine = (result: RunResult): string => {
  switch (result.status) {
    case "completed":
      return `completed ${brief(result.output)}`;
    case "held":
      return `held: ${result.reasons.map((r) => `${r.callId ?? ""} ${r.code}`.trim()).join(", ")}`;
    case "failed":
      return `failed: ${result.error.name}: ${result.error.message}`;
    case "stopped":
      return "stopped";
    case "cancelled":
      return `cancelled by ${result.by}`;
    case "paused":
      return "paused";
    case "waiting":
      return `waiting until ${result.wakesAt}`;
    case "elsewhere":
      return `${result.state} (another worker has it)`;
    case "pruned":
      return `${result.finalStatus} long ago, removed by retention ${result.prunedAt}`;
  }
};

/**
 * `holdfast demo`: one run of a small agent on the embedded journal: a scripted planner (the
 * stand-in for a model), then real file and shell tools in a work folder.
 */
export const demoCommand = async (options: DemoOptions, io: Io): Promise<number> => {
  const { store } = resolveStore(options.db);
  const besideJournal = isPostgresUrl(store)
    ? ".holdfast"
    : dirname(resolve(store.replace(/^(libsql|file):(\/\/)?/, "")));
  const workDir = resolve(options.work ?? join(besideJournal, "demo-work"));
  const writeFile = makeWriteFileTool(workDir);
  const shell = makeShellTool(workDir);
  const notify = makeNotifyTool(workDir);
  // Like any runtime, the demo first recovers runs a crashed process left behind (the crash experiment).
  const runtime = await openRuntime({
    ...(options.db === undefined ? {} : { store: options.db }),
    agents: [makeDemoAgent({ writeFile, shell, notify }, DEMO_SECRET)],
    tools: [writeFile, shell, notify],
    secrets: { [DEMO_SECRET.name]: DEMO_SECRET.value },
    recovery: { leaseMs: LEASE_MS },
  });
  const journal = { location: runtime.location };

  const { out } = io;
  const human = !options.json;
  try {
    if (human) {
      await out.line("holdfast demo");
      await out.line(`  journal      ${journal.location}`);
      await out.line(`  work folder  ${workDir}`);
      await out.line(`  planner      ${SCRIPTED_PLANNER_LABEL}; every tool call is real`);
      await out.line();
    }
    const recovery = runtime.recovery as RecoveryReport & {
      readonly done: Promise<ReadonlyArray<RunResult>>;
    };
    const recoveryText = recoveryLines(recovery);
    if (human && recoveryText.length > 0) {
      const found = recovery.interrupted.length;
      await out.line(`recovery found ${found} interrupted run${found === 1 ? "" : "s"}`);
      await out.lines(recoveryText);
      await out.line();
    }

    mkdirSync(workDir, { recursive: true, mode: 0o700 });
    const stamp = Date.now().toString(36);
    const chatId = `demo-${stamp}`;
    const inputId = `input-${randomUUID()}`;
    const handle = await runtime.submit({
      chatId,
      inputId,
      agent: "demo",
      content: { topic: "durable agent runs" },
    });
    if (human) await out.line(`run ${handle.runId} started (chat ${chatId})`);
    const result = await handle.result;
    const recovered = await recovery.done;
    const events = await runtime.events(handle.runId);

    if (options.json) {
      await out.json({
        journal: journal.location,
        workDir,
        planner: SCRIPTED_PLANNER_LABEL,
        recovery: {
          interrupted: recovery.interrupted,
          resumed: recovery.resumed,
          held: recovery.held,
          ownedElsewhere: recovery.ownedElsewhere,
          needsAttention: recovery.needsAttention,
          results: recovered,
        },
        runId: handle.runId,
        chatId,
        inputId,
        result,
        events: events.map(eventLine),
      });
    } else {
      await out.line();
      await out.line(`events of run ${handle.runId} (stream ${runStreamId(handle.runId)})`);
      await out.line(`  ${"v".padStart(3)}  ${"type".padEnd(22)} summary`);
      for (const recorded of events) {
        await out.line(
          `  ${String(recorded.version).padStart(3)}  ${recorded.event.type.padEnd(22)} ${summarizeEvent(recorded.event)}`,
        );
      }
      await out.line();
      await out.line(`result ${result.status}`);
      if (result.status === "completed") {
        await out.lines(
          JSON.stringify(result.output, null, 2)
            .split("\n")
            .map((line) => `  ${line}`),
        );
      } else {
        await out.line(`  ${resultLine(result)}`);
      }
      for (const earlier of recovered)
        await out.line(`recovered run ${earlier.runId}: ${resultLine(earlier)}`);
      // Without --db the same environment picks the same journal again; a URL's password stays hidden.
      const db = options.db === undefined ? "" : ` --db ${shellQuote(maskUrl(options.db))}`;
      await out.line();
      await out.lines([
        "what to try next",
        `  npx holdfast runs${db}`,
        "      every run in this journal and its status",
        `  npx holdfast show ${handle.runId}${db}`,
        "      this run's calls, whether each outcome is committed, and its events",
        `  npx holdfast events --json${db}`,
        "      the hash-chained log, one JSON object per line",
        "  the crash experiments (each kills the process with SIGKILL, then run the demo again):",
        `      HOLDFAST_CRASH_AT=after-effect-before-outcome HOLDFAST_CRASH_CALL=notify npx holdfast demo${db}`,
        "      the message went out, its outcome never reached the journal. The next demo's recovery",
        "      finds the call in doubt and nothing can prove what happened: it holds the run instead of",
        "      sending again. `npx holdfast show <runId>` says why and prints the decide commands.",
        `      npx holdfast cancel <runId> --by you --note "not needed"${db}`,
        "      ends that held run instead (the stop decision: nothing is sent again). On a running run,",
        "      from any process, it aborts the calls in flight and the run ends cancelled; on a finished",
        "      one it changes nothing and says so.",
        `      HOLDFAST_CRASH_AT=after-intent HOLDFAST_CRASH_CALL=shell npx holdfast demo${db}`,
        "      the shell runs under receipts: no start receipt proves the command never ran, so",
        "      recovery reconciles the call and runs it once.",
        `      HOLDFAST_CRASH_AT=after-outcome HOLDFAST_CRASH_CALL=shell npx holdfast demo${db}`,
        "      the outcome is committed: recovery resumes the run and serves finished calls from the journal.",
      ]);
      const held = (await runtime.runs()).filter((run) => run.status === "held");
      if (held.length > 0) {
        await out.line();
        await out.lines([
          `${held.length} run${held.length === 1 ? " is" : "s are"} held in this journal, waiting for a person:`,
          `  npx holdfast show ${held.at(-1)!.runId}${db}`,
          "      the evidence, and the decide commands that apply",
          `  npx holdfast serve${db}`,
          '      the recovery panel in a browser: every held run under "Needs you", with the same decisions',
        ]);
      }
    }
    if (result.status !== "completed") {
      throw new CliError(
        ExitCode.failed,
        `the demo run ${handle.runId} ended ${resultLine(result)}`,
        `see \`holdfast show ${handle.runId}\``,
      );
    }
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};

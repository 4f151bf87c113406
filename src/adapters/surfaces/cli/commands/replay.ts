import type { RunRow } from "../../../../projections/index.js";
import { InvalidInput, JournalUnavailable } from "../../../../runtime/errors.js";
import { type ReplayReport, type RunReplay, replayRuns } from "../../../replay.js";
import { resolveStore } from "../../../store.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import { requireJournalFile } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";
import { loadWorkerModule } from "./worker.js";

export interface ReplayCommandOptions {
  /** The ES module that exports the `agents` (and `tools`, `secrets`) of the code to check. */
  readonly agents?: string;
  readonly db?: string;
  readonly store?: string;
  /** Only these runs (repeatable). */
  readonly run?: ReadonlyArray<string>;
  readonly since?: string;
  readonly status?: ReadonlyArray<RunRow["status"]>;
  readonly json?: boolean;
}

const HELP = "see `holdfast replay --help`";

const resultText = (run: RunReplay): string =>
  run.result === "continues-live" ? "continues live" : run.result === "divergence" ? "DIVERGES" : run.result;

const atCall = (run: RunReplay): string =>
  run.result === "divergence"
    ? String(run.divergence.seq)
    : run.result === "continues-live"
      ? String(run.seq)
      : "";

const detailText = (run: RunReplay): string => {
  switch (run.result) {
    case "same":
      return `${run.calls} calls served from the journal`;
    case "continues-live":
      return run.detail;
    case "divergence":
      return run.divergence.detail;
    case "error":
      return run.detail;
  }
};

const sideText = (side: { kind: string; name: string; fingerprint: string; args: unknown } | null): string =>
  side
    ? `${side.kind} "${side.name}" fingerprint ${side.fingerprint.slice(0, 12)}\n      ${JSON.stringify(side.args)}`
    : "(no call)";

const summary = (report: ReplayReport): string => {
  const count = (result: RunReplay["result"]) => report.runs.filter((r) => r.result === result).length;
  return `${report.runs.length} run(s) replayed: ${count("same")} same, ${count("continues-live")} continue live, ${report.divergences} diverge, ${report.errors} not replayed`;
};

/**
 * `holdfast replay`: re-execute recorded runs against the agents a module exports, every call
 * served from the journal (opened read-only), no effect started; exit 1 when a run diverges or
 * cannot be replayed (decision 0082).
 */
export const replayCommand = async (
  options: ReplayCommandOptions,
  io: Io,
  stderr: NodeJS.WritableStream & { isTTY?: boolean },
): Promise<number> => {
  if (options.agents === undefined)
    throw usageError(
      "replay needs --agents <module>: the ES module that exports the `agents` (and `tools`) of the code to check",
      HELP,
    );
  if (options.db !== undefined && options.store !== undefined && options.db !== options.store)
    throw usageError("replay takes --db or --store, not both", HELP);
  if (options.since !== undefined && !Number.isFinite(Date.parse(options.since)))
    throw usageError(
      `--since ${options.since} is not a time`,
      "give an ISO 8601 time, e.g. 2026-12-05T06:00:00Z",
    );
  if (options.run?.length && (options.since !== undefined || options.status?.length))
    throw usageError(
      "replay takes --run, or --since/--status to choose runs, not both",
      "give the run ids alone, or drop --run and narrow with --since/--status",
    );
  let loaded: Awaited<ReturnType<typeof loadWorkerModule>>;
  try {
    loaded = await loadWorkerModule(options.agents);
  } catch (error) {
    // A module that is missing or exports no agents is bad input, as a wrong flag is.
    if (error instanceof CliError) throw new CliError(ExitCode.usage, error.reason, error.hint);
    throw error;
  }
  const db = options.store ?? options.db;
  try {
    requireJournalFile(resolveStore(db).store);
  } catch (error) {
    // A journal that is not there is a wrong --db: bad input, as the id of a run it lacks is.
    if (error instanceof JournalUnavailable)
      throw usageError(
        `there is no journal at ${error.location}: ${error.reason}`,
        "give --db the journal the runs were recorded in",
      );
    if (error instanceof CliError && error.exitCode === ExitCode.failed)
      throw new CliError(ExitCode.usage, error.reason, "give --db the journal the runs were recorded in");
    throw error;
  }
  const tty = stderr.isTTY === true;
  let report: ReplayReport;
  try {
    report = await replayRuns({
      ...loaded,
      ...(db === undefined ? {} : { store: db }),
      ...(options.run?.length ? { runIds: options.run } : {}),
      ...(options.since === undefined ? {} : { since: options.since }),
      ...(options.status?.length ? { status: options.status } : {}),
      onProgress: ({ done, total, run }) => {
        // A terminal gets one line rewritten in place; a log a line every 100 runs and the last.
        if (tty) stderr.write(`\rreplaying: ${done}/${total} runs (${run.runId} ${resultText(run)})\x1b[K`);
        else if (done % 100 === 0 || done === total) stderr.write(`replayed ${done}/${total} runs\n`);
        if (tty && done === total) stderr.write("\n");
      },
    });
  } catch (error) {
    if (error instanceof InvalidInput) throw usageError(error.message, HELP);
    throw error;
  }
  const code = report.divergences > 0 || report.errors > 0 ? ExitCode.failed : ExitCode.ok;
  if (options.json) {
    await io.out.json(report);
    return code;
  }
  if (report.runs.length === 0) {
    await io.out.line("no runs matched; nothing replayed");
    return code;
  }
  await io.out.line(
    table(
      ["run", "agent", "result", "at call", "detail"],
      report.runs.map((run) => [run.runId, run.agent, resultText(run), atCall(run), detailText(run)]),
    ),
  );
  for (const run of report.runs) {
    if (run.result !== "divergence") continue;
    const d = run.divergence;
    await io.out.line();
    await io.out.line(`run ${run.runId} diverges at call ${d.seq} (${d.callId}): ${d.detail}`);
    await io.out.line(`  recorded: ${sideText(d.recorded)}`);
    await io.out.line(`  now:      ${sideText(d.now)}`);
  }
  await io.out.line();
  await io.out.line(summary(report));
  if (code !== ExitCode.ok)
    await io.out.line(
      "before deploying: restore the code these runs were recorded with, register the change as a new agent version, or decide the runs",
    );
  return code;
};

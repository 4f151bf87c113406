import { userInfo } from "node:os";
import type { DecisionKind, HoldReason } from "../../../events/index.js";
import { blockingCalls, type RunContext } from "../../../machines/index.js";
import { DECISIONS } from "../../../runtime/decide.js";
import type { RunResult } from "../../../runtime/engine.js";
import { NoteRequired } from "../../../runtime/errors.js";
import { openRuntime, type Runtime } from "../../openRuntime.js";
import { maskUrl } from "../../store.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import { describeFailure } from "../failure.js";
import { openExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";

export { DECISIONS };

/** What each decision does, in one line (for `show` and `decide --help`). */
export const DECISION_MEANINGS: Readonly<Record<DecisionKind, string>> = {
  resume: "close the call as unknown and continue; the agent gets OutcomeUnknown for it and must handle it",
  stop: "end the run as stopped; the call stays unknown in the journal; the chat takes new input",
  "new-attempt": "run the call again on purpose (next attempt): a second effect if the first one happened",
  "confirmed-completed":
    "you checked that it happened: record that as its outcome (optionally --result JSON); it is not run again",
  "confirmed-not-completed": "you checked that it did not happen: the call runs fresh when the run continues",
};

const CONFIRMATIONS: ReadonlySet<DecisionKind> = new Set(["confirmed-completed", "confirmed-not-completed"]);

export const shellQuote = (text: string): string =>
  /^[\w./:@=-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;

/** ` --db PATH` when the command was given one (a URL's password masked), else nothing. */
export const dbFlag = (db: string | undefined): string =>
  db === undefined ? "" : ` --db ${shellQuote(maskUrl(db))}`;

/** Who decides: `--by`, else the OS user name. */
export const operatorName = (by: string | undefined): string => {
  if (by !== undefined) {
    if (by.trim() === "") throw usageError("--by is empty", "say who decides: --by NAME");
    return by.trim();
  }
  try {
    const name = userInfo().username;
    if (name) return name;
  } catch {
    // No user entry for this uid (some containers): fall through.
  }
  throw usageError("cannot tell who you are from the operating system", "say who decides: --by NAME");
};

/**
 * A runtime for operator commands: the journal must exist (never created by a typo), no agents, no
 * tools, an empty safe list and no recovery on open — this process only records what a person
 * decided; a runtime with the run's agent continues the run.
 */
export const openOperatorRuntime = async (db: string | undefined): Promise<Runtime> => {
  const journal = await openExistingJournal(db);
  await journal.close();
  return openRuntime({
    ...(db === undefined ? {} : { store: db }),
    agents: [],
    tools: [],
    allowlist: {},
    recovery: { onOpen: false },
  });
};

export interface HeldCommand {
  /** `decide` or `retry`. */
  readonly action: "decide" | "retry";
  readonly decision?: DecisionKind;
  readonly callId?: string;
  /** The command line to run (with placeholders in `…` for the note). */
  readonly command: string;
  readonly meaning: string;
}

/**
 * The commands that apply to a held run at `version`: the five decisions when a call is in doubt;
 * a retry grant (or stop) for a definite failure the agent did not handle; stop (and resume, once
 * the agent that started the run is back) for a determinism conflict; nothing for corruption.
 */
export const heldCommands = (
  runId: string,
  context: RunContext,
  reasons: ReadonlyArray<HoldReason>,
  db: string | undefined,
): HeldCommand[] => {
  const at = `--based-on ${context.version}`;
  const suffix = dbFlag(db);
  const decide = (decision: DecisionKind, meaning = DECISION_MEANINGS[decision]): HeldCommand => ({
    action: "decide",
    decision,
    command: `holdfast decide ${runId} ${decision} ${at}${CONFIRMATIONS.has(decision) ? ' --note "…"' : ""}${suffix}`,
    meaning,
  });
  if (reasons.some((reason) => reason.code === "corrupt")) return [];
  const commands: HeldCommand[] = [];
  if (blockingCalls(context).length > 0) {
    commands.push(...DECISIONS.map((decision) => decide(decision)));
    return commands;
  }
  for (const reason of reasons) {
    if (reason.code !== "decision-needed" || reason.callId === undefined) continue;
    if (context.calls[reason.callId]?.status !== "failed") continue;
    commands.push({
      action: "retry",
      callId: reason.callId,
      command: `holdfast retry ${runId} ${reason.callId} --attempts 1${suffix}`,
      meaning: "the call failed definitely (nothing took effect): allow one more attempt",
    });
  }
  if (reasons.some((reason) => reason.code === "determinism")) {
    commands.push(
      decide("stop"),
      decide(
        "resume",
        "only after restoring the agent code that started the run: otherwise it is held again at the same call",
      ),
    );
    return commands;
  }
  commands.push(decide("stop"));
  if (commands.length === 1)
    commands.push(decide("resume", "continue the run: the agent runs again from the top"));
  return commands;
};

/** A refusal from the runtime, saying that nothing was written (it never is, on a refusal). */
export const refusal = (error: unknown): unknown => {
  if (!hasTag(error) || !REFUSALS.has(error._tag)) return error;
  const failure = describeFailure(error);
  return new CliError(ExitCode.failed, `${failure.reason}; nothing was written`, failure.hint);
};

const REFUSALS: ReadonlySet<string> = new Set([
  "StaleDecision",
  "RunNotHeld",
  "NoteRequired",
  "InvalidInput",
  "RetryNotAllowed",
  "RetryLimitExceeded",
  "CallNotFound",
]);

const hasTag = (error: unknown): error is { readonly _tag: string } =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string";

export interface DecideOptions {
  readonly basedOn: number;
  readonly note?: string;
  readonly result?: string;
  readonly by?: string;
  readonly db?: string;
  readonly json?: boolean;
}

const parseResult = (text: string | undefined): unknown => {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError(
      ExitCode.failed,
      `--result is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was written`,
      `pass the call's result as JSON, e.g. --result '{"sent":true}'`,
    );
  }
};

/** What happens next, said plainly: the CLI records; a runtime with the agent continues. */
export const continuationText = (agent: string, result: RunResult, db: string | undefined): string => {
  switch (result.status) {
    case "stopped":
      return "the run is stopped; its chat takes new input";
    case "completed":
      return "the run is completed";
    case "failed":
      return `the run failed: ${result.error.message}`;
    case "held":
      return "the run is held again";
    case "elsewhere": {
      const name = agent.split("@")[0] ?? agent;
      const demo =
        name === "demo"
          ? ` — for demo runs that is \`holdfast demo${dbFlag(db)}\`, which registers the demo agent`
          : "";
      return `recorded; the run continues when a runtime with agent "${agent}" opens this journal (your application on start-up, or \`holdfast worker --module …\` with that agent)${demo}`;
    }
  }
};

/** `holdfast decide <runId> <decision>`: record a person's decision on a held run. */
export const decideCommand = async (
  runId: string,
  decision: string,
  options: DecideOptions,
  io: Io,
): Promise<number> => {
  if (!(DECISIONS as ReadonlyArray<string>).includes(decision)) {
    throw usageError(
      `"${decision}" is not a decision; use one of ${DECISIONS.join(", ")}`,
      "see `holdfast decide --help`",
    );
  }
  const kind = decision as DecisionKind;
  const decidedBy = operatorName(options.by);
  if (options.result !== undefined && kind !== "confirmed-completed") {
    throw usageError(
      `--result goes only with confirmed-completed, not ${kind}`,
      "drop --result, or decide confirmed-completed",
    );
  }
  const result = parseResult(options.result);
  if (CONFIRMATIONS.has(kind) && (options.note ?? "").trim() === "") {
    const refused = new NoteRequired({ runId, decision: kind });
    throw new CliError(
      ExitCode.failed,
      `${refused.message}; nothing was written`,
      `say how you know, e.g. --note "the email is in the sent folder of ops@…"`,
    );
  }
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime
      .decide(runId, {
        decision: kind,
        basedOnVersion: options.basedOn,
        decidedBy,
        ...(options.note === undefined ? {} : { note: options.note }),
        ...(result === undefined ? {} : { result }),
      })
      .catch((error: unknown) => {
        throw refusal(error);
      });
    const after = await outcome.result;
    const row = (await runtime.runs()).find((run) => run.runId === runId);
    const agent = row?.agent ?? "(unknown)";
    const next = continuationText(agent, after, options.db);
    if (options.json) {
      await io.out.json({
        runId,
        decision: kind,
        basedOnVersion: options.basedOn,
        decidedBy,
        version: outcome.version,
        status: after.status === "elsewhere" ? after.state : after.status,
        agent,
        next,
      });
      return ExitCode.ok;
    }
    await io.out.lines([
      `recorded ${kind} on run ${runId} by ${decidedBy} (version ${options.basedOn} → ${outcome.version})`,
      next,
    ]);
    if (kind === "confirmed-completed" && result !== undefined) {
      await io.out.line(
        "note: this command has no tool definitions, so --result was not checked against the tool's result Schema",
      );
    }
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};

import { userInfo } from "node:os";
import type { DecisionKind, HoldReason } from "../../../../events/index.js";
import { blockingCalls, type RunContext } from "../../../../machines/index.js";
import type { RunRow } from "../../../../projections/index.js";
import { DECISIONS, type DecisionRequest } from "../../../../runtime/decide.js";
import { OUTCOME_AFTER_HOLD } from "../../../../runtime/dispatch.js";
import type { RunResult } from "../../../../runtime/engine.js";
import { NoteRequired } from "../../../../runtime/errors.js";
import type { NextStep } from "../../../../runtime/liveness.js";
import { MODEL_ANSWER_HINT } from "../../../../runtime/modelAnswer.js";
import { readLiveness } from "../../../liveness.js";
import { localWorkerId } from "../../../localWorker.js";
import { openRuntime, type Runtime } from "../../../openRuntime.js";
import { maskUrl } from "../../../store.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import { describeFailure } from "../failure.js";
import { openExistingJournal, withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";

/** What each decision does, in one line (for `show` and `decide --help`). */
export const DECISION_MEANINGS: Readonly<Record<DecisionKind, string>> = {
  resume: "close the call as unknown and continue; the agent gets OutcomeUnknown for it and must handle it",
  stop: "end the run as stopped; the call stays unknown in the journal; the chat takes new input",
  "new-attempt": "run the call again on purpose (next attempt): a second effect if the first one happened",
  "confirmed-completed":
    "you checked that it happened: record that as its outcome (optionally with its result as JSON); it is not run again",
  "confirmed-not-completed": "you checked that it did not happen: the call runs fresh when the run continues",
};

/**
 * What two decisions mean for a model call (decision 0036): its only outcome is its answer, so
 * "It happened" needs that answer, and asking again is the safe choice.
 */
export const MODEL_DECISION_MEANINGS: Readonly<Partial<Record<DecisionKind, string>>> = {
  "new-attempt":
    "ask the model again — recommended for a model call: it has no effect besides its answer (the provider may bill it twice)",
  "confirmed-completed": `you know the model's answer (the provider's log or dashboard shows it): record it, as ${MODEL_ANSWER_HINT}; the model is not asked again`,
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
    // Never a worker's id from the environment (`kubectl exec pod -- holdfast decide …`): an
    // operator is not that worker, and must not renew or release its claims.
    workerId: `operator:${localWorkerId()}`,
  });
};

export interface HeldCommand {
  /** `decide` or `retry`. */
  readonly action: "decide" | "retry";
  readonly decision?: DecisionKind;
  /** The call the command is about (the in-doubt call it decides, or the failed call it retries). */
  readonly callId?: string;
  /** The command line to run (with placeholders in `…` for the note). */
  readonly command: string;
  readonly meaning: string;
}

/**
 * The commands that apply to a held run at `version`: for each call in doubt, its five decisions
 * (several calls are decided together by repeating `--call`); a retry grant (or stop) for a
 * definite failure the agent did not handle; stop (and resume, once the agent that started the run
 * is back) for a determinism conflict; only stop for a run that needs attention.
 */
export const heldCommands = (
  runId: string,
  context: RunContext,
  reasons: ReadonlyArray<HoldReason>,
  db: string | undefined,
): HeldCommand[] => {
  const at = `--based-on ${context.version}`;
  const suffix = dbFlag(db);
  const decideRun = (decision: DecisionKind, meaning = DECISION_MEANINGS[decision]): HeldCommand => ({
    action: "decide",
    decision,
    command: `holdfast decide ${runId} ${decision} ${at}${suffix}`,
    meaning,
  });
  if (reasons.some((reason) => reason.code === "corrupt")) {
    return [
      decideRun("stop", "end the run as stopped; its history cannot be trusted, so nothing else is accepted"),
    ];
  }
  const inDoubt = blockingCalls(context);
  if (inDoubt.length > 0) {
    return inDoubt.flatMap((call) => {
      const model = call.kind === "model";
      // A model call: "Run it again" first, as recommended; "It happened" with the answer to give.
      const order = model
        ? ["new-attempt" as const, ...DECISIONS.filter((d) => d !== "new-attempt")]
        : DECISIONS;
      return order.map(
        (decision): HeldCommand => ({
          action: "decide",
          decision,
          callId: call.callId,
          command: `holdfast decide ${runId} ${at} --call ${call.callId} ${decision}${CONFIRMATIONS.has(decision) ? ' --note "…"' : ""}${model && decision === "confirmed-completed" ? ` --call-result ${call.callId} '{"text":"…"}'` : ""}${suffix}`,
          meaning: (model ? MODEL_DECISION_MEANINGS[decision] : undefined) ?? DECISION_MEANINGS[decision],
        }),
      );
    });
  }
  const commands: HeldCommand[] = [];
  for (const reason of reasons) {
    if (reason.code !== "decision-needed" || reason.callId === undefined) continue;
    if (context.calls.get(reason.callId)?.status !== "failed") continue;
    commands.push({
      action: "retry",
      callId: reason.callId,
      command: `holdfast retry ${runId} ${reason.callId} --attempts 1${suffix}`,
      meaning: "the call failed definitely (nothing took effect): allow one more attempt",
    });
  }
  if (reasons.some((reason) => reason.code === "determinism")) {
    commands.push(
      decideRun("stop"),
      decideRun(
        "resume",
        "only after restoring the agent code that started the run: otherwise it is held again at the same call",
      ),
    );
    return commands;
  }
  // Nothing is in doubt here: no call "stays unknown" (a late outcome may have answered the hold).
  commands.push(decideRun("stop", "end the run as stopped; the chat takes new input"));
  const answered = reasons.some(
    (reason) => reason.callId !== undefined && context.calls.get(reason.callId)?.status === "completed",
  );
  if (commands.length === 1)
    commands.push(
      decideRun(
        "resume",
        reasons.some((reason) => reason.code === "crash-loop")
          ? "once what ended its processes is fixed: the agent runs again from the top, and the interruptions are counted from zero"
          : answered
            ? `${OUTCOME_AFTER_HOLD} (the agent runs again from the top and is served the recorded outcome)`
            : "continue the run: the agent runs again from the top",
      ),
    );
  return commands;
};

/** A refusal from the runtime, saying that nothing was written (it never is, on a refusal). */
export const refusal = (error: unknown): unknown => {
  if (!hasTag(error) || !REFUSALS.has(error._tag)) return error;
  const failure = describeFailure(error);
  return new CliError(ExitCode.failed, `${failure.reason}; nothing was written`, failure.hint);
};

const REFUSALS: ReadonlySet<string> = new Set([
  "DecisionNeedsCalls",
  "CallNotInDoubt",
  "StaleDecision",
  "RunNotHeld",
  "NoteRequired",
  "InvalidInput",
  "RetryNotAllowed",
  "RetryLimitExceeded",
  "CallNotFound",
  "NotAwaitingApproval",
  "InvalidToolArgs",
  "ForkPastInDoubt",
]);

const hasTag = (error: unknown): error is { readonly _tag: string } =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string";

export interface DecideOptions {
  readonly basedOn: number;
  /** `--call <callId> <decision>`, repeatable: the values in pairs. */
  readonly call?: ReadonlyArray<string>;
  /** `--call-note <callId> <text>`, repeatable. */
  readonly callNote?: ReadonlyArray<string>;
  /** `--call-result <callId> <json>`, repeatable. */
  readonly callResult?: ReadonlyArray<string>;
  readonly note?: string;
  readonly result?: string;
  readonly by?: string;
  readonly db?: string;
  readonly json?: boolean;
}

const parseResult = (text: string | undefined, flag: string): unknown => {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError(
      ExitCode.failed,
      `${flag} is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was written`,
      `pass the call's result as JSON, e.g. ${flag} '{"sent":true}'`,
    );
  }
};

/** `--flag a x --flag b y` arrives as [a, x, b, y]: pairs, keyed by call id. */
const pairs = (
  values: ReadonlyArray<string> | undefined,
  flag: string,
  second: string,
): Map<string, string> => {
  const map = new Map<string, string>();
  if (!values) return map;
  if (values.length % 2 !== 0) {
    throw usageError(
      `${flag} takes a call id and a ${second}`,
      `e.g. ${flag} <runId>/0 ${second === "decision" ? "confirmed-completed" : `<${second}>`}`,
    );
  }
  for (let i = 0; i < values.length; i += 2) {
    const callId = values[i]!;
    if (map.has(callId)) throw usageError(`${flag} names ${callId} twice`, `give each call one ${flag}`);
    map.set(callId, values[i + 1]!);
  }
  return map;
};

const asDecision = (value: string): DecisionKind => {
  if (!(DECISIONS as ReadonlyArray<string>).includes(value)) {
    throw usageError(
      `"${value}" is not a decision; use one of ${DECISIONS.join(", ")}`,
      "see `holdfast decide --help`",
    );
  }
  return value as DecisionKind;
};

/** What the command asks the runtime for: per call (`--call`), or the run-level shorthand. */
const requestOf = (
  runId: string,
  decision: string | undefined,
  options: DecideOptions,
  decidedBy: string,
): DecisionRequest => {
  const base = {
    basedOnVersion: options.basedOn,
    decidedBy,
    ...(options.note === undefined ? {} : { note: options.note }),
  };
  const chosen = pairs(options.call, "--call", "decision");
  const notes = pairs(options.callNote, "--call-note", "note");
  const results = pairs(options.callResult, "--call-result", "result");
  if (chosen.size === 0) {
    if (decision === undefined) {
      throw usageError(
        "say what you decide",
        `holdfast decide ${runId} --call <callId> <decision> --based-on N (see holdfast show ${runId})`,
      );
    }
    if (notes.size > 0 || results.size > 0)
      throw usageError(
        "--call-note and --call-result go with --call",
        "decide per call with --call <callId> <decision>",
      );
    const kind = asDecision(decision);
    if (options.result !== undefined && kind !== "confirmed-completed") {
      throw usageError(
        `--result goes only with confirmed-completed, not ${kind}`,
        "drop --result, or decide confirmed-completed",
      );
    }
    const result = parseResult(options.result, "--result");
    if (CONFIRMATIONS.has(kind) && (options.note ?? "").trim() === "") {
      const refused = new NoteRequired({ runId, decision: kind });
      throw new CliError(
        ExitCode.failed,
        `${refused.message}; nothing was written`,
        `say how you know, e.g. --note "the email is in the sent folder of ops@…"`,
      );
    }
    return { ...base, decision: kind, ...(result === undefined ? {} : { result }) };
  }
  if (decision !== undefined) {
    throw usageError(
      `decide either the run (${decision}) or its calls (--call), not both`,
      `holdfast decide ${runId} --call <callId> <decision> … --based-on N`,
    );
  }
  if (options.result !== undefined)
    throw usageError("--result goes with the run-level decision", "use --call-result <callId> <json>");
  for (const callId of [...notes.keys(), ...results.keys()]) {
    if (!chosen.has(callId))
      throw usageError(`${callId} has a note or result but no --call`, `add --call ${callId} <decision>`);
  }
  const calls: Record<string, { decision: DecisionKind; note?: string; result?: unknown }> = {};
  for (const [callId, value] of chosen) {
    const kind = asDecision(value);
    const note = notes.get(callId);
    const result = parseResult(results.get(callId), "--call-result");
    if (result !== undefined && kind !== "confirmed-completed")
      throw usageError(
        `--call-result for ${callId} goes only with confirmed-completed, not ${kind}`,
        `drop it, or decide ${callId} confirmed-completed`,
      );
    if (CONFIRMATIONS.has(kind) && (note ?? options.note ?? "").trim() === "") {
      const refused = new NoteRequired({ runId, decision: kind });
      throw new CliError(
        ExitCode.failed,
        `${refused.message.replace(`run ${runId}`, `call ${callId}`)}; nothing was written`,
        `say how you know, e.g. --call-note ${callId} "the email is in the sent folder" (or --note for every call)`,
      );
    }
    calls[callId] = {
      decision: kind,
      ...(note === undefined ? {} : { note }),
      ...(result === undefined ? {} : { result }),
    };
  }
  return { ...base, calls };
};

/** For demo runs, how to start a runtime with the demo agent (added where none is live). */
export const demoHint = (agent: string, db: string | undefined): string =>
  agent.startsWith("demo@")
    ? ` — for demo runs that is \`${process.env.npm_command === "exec" ? "npx " : ""}holdfast demo${dbFlag(db)}\`, which registers the demo agent`
    : "";

/**
 * What happens next, said plainly (decision 0053): the CLI records; which runtime continues the run
 * and whether one is live now, from the journal's claims and runtime registry — the same sentence
 * the API and the panel give. `status`: the run's status after the action when the action knows it
 * better than the runs row (a cancel or pause requested).
 */
export const nextStepAfter = async (
  runId: string,
  result: RunResult | { readonly status: string },
  db: string | undefined,
): Promise<NextStep> =>
  withExistingReader(db, async (reader) => {
    const row = await reader.projection<RunRow>("runs", runId);
    if (result.status === "pruned" || !row) {
      const ended = "finalStatus" in result ? ` ${result.finalStatus}` : "";
      return {
        agent: row?.agent ?? "(unknown)",
        live: false,
        runtimes: [],
        text: `the run ended${ended} and was removed by retention`,
      };
    }
    const liveness = await readLiveness(reader);
    const status = result.status === "elsewhere" ? row.status : result.status;
    const step = liveness.next(row, { status, hint: demoHint(row.agent, db) });
    if (result.status === "failed" && "error" in result)
      return { ...step, text: `the run failed: ${result.error.message}` };
    return step;
  });

/** `holdfast decide <runId> [decision] [--call <callId> <decision>]…`: record a person's decisions on a held run. */
export const decideCommand = async (
  runId: string,
  decision: string | undefined,
  options: DecideOptions,
  io: Io,
): Promise<number> => {
  const decidedBy = operatorName(options.by);
  const request = requestOf(runId, decision, options, decidedBy);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime.decide(runId, request).catch((error: unknown) => {
      throw refusal(error);
    });
    const after = await outcome.result;
    const step = await nextStepAfter(runId, after, options.db);
    const { agent } = step;
    const next = step.text;
    const decided = request.calls
      ? Object.entries(request.calls).map(([callId, d]) => ({ callId, decision: d.decision }))
      : [{ callId: null, decision: request.decision! }];
    const what = decided.map((d) => (d.callId ? `${d.callId} ${d.decision}` : d.decision)).join(", ");
    if (options.json) {
      await io.out.json({
        runId,
        decisions: decided,
        basedOnVersion: options.basedOn,
        decidedBy,
        version: outcome.version,
        status: after.status === "elsewhere" ? after.state : after.status,
        agent,
        unchecked: outcome.unchecked,
        next,
        live: step.live,
      });
      return ExitCode.ok;
    }
    await io.out.lines([
      `recorded ${what} on run ${runId} by ${decidedBy} (version ${options.basedOn} → ${outcome.version})`,
      next,
    ]);
    for (const callId of outcome.unchecked) {
      await io.out.line(
        `note: this command has no tool definitions, so the result given for ${callId} was not checked against the tool's result Schema`,
      );
    }
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};

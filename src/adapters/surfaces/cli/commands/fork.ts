import type { RunResult } from "../../../../runtime/engine.js";
import { openRuntime, type Runtime } from "../../../openRuntime.js";
import { ExitCode, usageError } from "../CliError.js";
import type { Io } from "../Output.js";
import { openOperatorRuntime, operatorName, refusal } from "./decide.js";
import { loadWorkerModule } from "./worker.js";

export interface ForkCommandOptions {
  /** The seq of the first call that runs live (`--at`). */
  readonly at: string;
  /** `seq=json`, repeatable: an outcome given in place of the recorded one. */
  readonly outcome?: ReadonlyArray<string>;
  readonly input?: string;
  readonly chat?: string;
  readonly inputId?: string;
  readonly agentVersion?: string;
  readonly whenBusy?: "refuse" | "queue" | "interrupt";
  /** The ES module exporting `agents` and `tools`: the fork runs here; without it, a worker runs it. */
  readonly module?: string;
  readonly by?: string;
  readonly note?: string;
  readonly db?: string;
  readonly json?: boolean;
}

const json = (text: string, what: string, example: string): unknown => {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw usageError(
      `${what} is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was written`,
      example,
    );
  }
};

const seqOf = (text: string, what: string): number => {
  if (!/^\d+$/.test(text)) throw usageError(`${what} "${text}" is not a call seq`, "give a seq, e.g. --at 3");
  return Number(text);
};

const outcomesOf = (pairs: ReadonlyArray<string>): Record<string, unknown> => {
  const outcomes: Record<string, unknown> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at < 0)
      throw usageError(
        `--outcome ${pair} has no "="`,
        `give --outcome SEQ=JSON, e.g. --outcome 2='{"ok":true}'`,
      );
    const seq = seqOf(pair.slice(0, at), "--outcome");
    outcomes[String(seq)] = json(
      pair.slice(at + 1),
      `--outcome ${seq}`,
      `e.g. --outcome ${seq}='{"ok":true}'`,
    );
  }
  return outcomes;
};

/** What to say about how the fork ended, or where it waits. */
const ending = (result: RunResult): string => {
  switch (result.status) {
    case "completed":
      return "completed";
    case "held":
      return `held: ${result.reasons.map((r) => `${r.callId ?? ""} ${r.code}`.trim()).join(", ")}; see \`holdfast show ${result.runId}\``;
    case "failed":
      return `failed: ${result.error.name}: ${result.error.message}`;
    default:
      return result.status;
  }
};

/**
 * `holdfast fork <runId> --at <seq>` (decision 0083): a new run reusing the source's recorded
 * outcomes before call `seq` and running live from it. With `--module` the fork runs in this
 * process, with the module's agents, until it settles; without it, the fork is recorded and a worker
 * with the agent (`holdfast worker`) continues it. The source run is never written to.
 */
export const forkCommand = async (runId: string, options: ForkCommandOptions, io: Io): Promise<number> => {
  const atCall = seqOf(options.at, "--at");
  if (options.note === undefined || options.note.trim() === "")
    throw usageError("--note is required", 'say why you fork, e.g. --note "retry with the fixed quote"');
  const by = operatorName(options.by);
  const outcomes = outcomesOf(options.outcome ?? []);
  const input =
    options.input === undefined
      ? undefined
      : json(options.input, "--input", `e.g. --input '{"text":"hello"}'`);
  let runtime: Runtime;
  if (options.module !== undefined) {
    const { agents, tools, secrets } = await loadWorkerModule(options.module);
    runtime = await openRuntime({
      ...(options.db === undefined ? {} : { store: options.db }),
      agents,
      tools,
      secrets,
      recovery: { onOpen: false },
    });
  } else runtime = await openOperatorRuntime(options.db);
  try {
    const handle = await runtime
      .fork(runId, {
        atCall,
        outcomes,
        ...(input === undefined ? {} : { input }),
        ...(options.chat === undefined ? {} : { chatId: options.chat }),
        ...(options.inputId === undefined ? {} : { inputId: options.inputId }),
        ...(options.agentVersion === undefined ? {} : { agentVersion: options.agentVersion }),
        ...(options.whenBusy === undefined ? {} : { whenBusy: options.whenBusy }),
        by,
        note: options.note,
      })
      .catch((error: unknown) => {
        throw refusal(error);
      });
    if (handle.queued) {
      const next = `queued in chat ${handle.chatId} as input ${handle.inputId} (position ${handle.position ?? "-"}): it is admitted as a fork of ${runId} when the chat's active run ends, by a runtime with the agent`;
      if (options.json)
        await io.out.json({
          forkedFrom: runId,
          queued: true,
          chatId: handle.chatId,
          inputId: handle.inputId,
          position: handle.position,
          next,
        });
      else await io.out.lines([next]);
      return ExitCode.ok;
    }
    if (options.module === undefined) {
      const next = `run ${handle.runId} forked from ${runId} at call ${atCall}${handle.reused ? " (recorded before)" : ""}; a worker with the agent (\`holdfast worker --module …\`) takes it over and continues it from call ${atCall}`;
      if (options.json)
        await io.out.json({
          forkedFrom: runId,
          runId: handle.runId,
          reused: handle.reused,
          status: "recorded",
          next,
        });
      else await io.out.lines([next]);
      return ExitCode.ok;
    }
    const result = await handle.result;
    if (options.json)
      await io.out.json({ forkedFrom: runId, runId: handle.runId, reused: handle.reused, result });
    else
      await io.out.lines([`run ${handle.runId} forked from ${runId} at call ${atCall}: ${ending(result)}`]);
    return result.status === "completed" ? ExitCode.ok : ExitCode.failed;
  } finally {
    await runtime.close();
  }
};

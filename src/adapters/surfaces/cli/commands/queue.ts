import { listQueue } from "../../../../runtime/queue.js";
import { CliError, ExitCode } from "../CliError.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";
import { openOperatorRuntime, operatorName } from "./decide.js";

export interface QueueOptions {
  readonly db?: string;
  readonly json?: boolean;
}

export interface WithdrawOptions extends QueueOptions {
  readonly by?: string;
  readonly reason?: string;
}

/** `holdfast queue <chatId>`: the chat's pending inputs in order, and the run they wait for. */
export const queueCommand = async (chatId: string, options: QueueOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    const queue = await listQueue({ journal }, chatId);
    if (options.json) {
      await io.out.json(queue);
      return ExitCode.ok;
    }
    const { out } = io;
    const waiting = queue.waitingFor;
    await out.line(
      waiting
        ? `chat ${chatId}: ${queue.items.length} input(s) queued behind run ${waiting.runId} — ${waiting.detail}`
        : `chat ${chatId}: ${queue.items.length} input(s) queued; no active run`,
    );
    if (queue.items.length === 0) return ExitCode.ok;
    await out.line();
    await out.line(
      table(
        ["#", "input", "agent", "queued at", "by"],
        queue.items.map((item) => [
          String(item.position),
          item.inputId,
          item.agent,
          item.queuedAt,
          item.by ?? "",
        ]),
      ),
    );
    if (waiting?.status === "held") {
      await out.line();
      await out.line(`decide the held run to let the queue move: holdfast show ${waiting.runId}`);
    }
    return ExitCode.ok;
  });

/**
 * `holdfast queue withdraw <chatId> <inputId>`: take a pending input out of the chat's queue.
 * Refused (exit 1, nothing written) once it was admitted; withdrawing it again says so and exits 0.
 */
export const withdrawCommand = async (
  chatId: string,
  inputId: string,
  options: WithdrawOptions,
  io: Io,
): Promise<number> => {
  const by = operatorName(options.by);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime
      .withdraw(chatId, inputId, { by, ...(options.reason === undefined ? {} : { reason: options.reason }) })
      .catch((error: unknown) => {
        const tag = (error as { _tag?: unknown })?._tag;
        if (tag === "QueuedInputAdmitted" || tag === "QueuedInputNotFound")
          throw new CliError(
            ExitCode.failed,
            `${(error as Error).message.split(";")[0]}; nothing was written`,
            tag === "QueuedInputAdmitted"
              ? `follow the run: holdfast show ${(error as { runId: string }).runId}`
              : `list the chat's queue: holdfast queue ${chatId}`,
          );
        throw error;
      });
    if (options.json) {
      await io.out.json({ ...outcome, by });
      return ExitCode.ok;
    }
    await io.out.line(outcome.withdrawn ? `${outcome.detail}, by ${by}` : `${outcome.detail}; nothing to do`);
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};

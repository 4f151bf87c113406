import type { ChatRow, RunRow } from "../../../../projections/index.js";
import { readCheckpoint } from "../../../../runtime/checkpoint.js";
import { listQueue } from "../../../../runtime/queue.js";
import { CliError, ExitCode } from "../CliError.js";
import { shortHash } from "../eventFormat.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";

export interface ShowChatOptions {
  readonly db?: string;
  readonly json?: boolean;
}

/**
 * `holdfast show --chat <chatId>`: the chat's runs and its latest checkpoint (masked, as stored).
 * A checkpoint that does not match its digest fails the command (`CheckpointInvalid`), unrepaired.
 */
export const showChatCommand = async (chatId: string, options: ShowChatOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    const chat = await journal.projection<ChatRow>("chats", chatId);
    if (!chat) {
      throw new CliError(
        ExitCode.failed,
        `chat ${chatId} is not in this journal`,
        "list runs and their chats with `holdfast runs`",
      );
    }
    const checkpoint = await readCheckpoint(journal, chatId);
    const queue = await listQueue({ journal }, chatId);
    const runs = (await journal.projectionRows<RunRow>("runs"))
      .filter((run) => run.chatId === chatId)
      .toSorted((a, b) => a.admittedAt.localeCompare(b.admittedAt) || a.runId.localeCompare(b.runId))
      .map(({ runId, inputId, agent, status, needsAttention, updatedAt }) => ({
        runId,
        inputId,
        agent,
        status,
        needsAttention,
        updatedAt,
      }));

    if (options.json) {
      await io.out.json({ chatId, lastRunId: chat.lastRunId, runs, checkpoint, queue });
      return 0;
    }
    const { out } = io;
    await out.line(`chat ${chatId}`);
    await out.line(`  last run   ${chat.lastRunId}`);
    await out.line();
    await out.line(
      table(
        ["run", "input", "agent", "status", "updated"],
        runs.map((run) => [
          run.runId,
          run.inputId,
          run.agent,
          run.needsAttention ? `${run.status} (needs attention)` : run.status,
          run.updatedAt,
        ]),
      ),
    );
    await out.line();
    if (queue.items.length > 0) {
      await out.line(
        `queue: ${queue.items.length} input(s) waiting${queue.waitingFor ? ` for run ${queue.waitingFor.runId} (${queue.waitingFor.status})` : ""}: ${queue.items.map((i) => i.inputId).join(", ")} — holdfast queue ${chatId}`,
      );
      await out.line();
    }
    if (!checkpoint) {
      await out.line("checkpoint: none (no run of this chat saved one)");
      return 0;
    }
    await out.line(
      `checkpoint saved by run ${checkpoint.runId} ${checkpoint.afterSeq < 0 ? "before its first call" : `after call ${checkpoint.runId}/${checkpoint.afterSeq}`} (digest ${shortHash(checkpoint.digest)}; masked, as stored)`,
    );
    await out.lines(
      JSON.stringify(checkpoint.state, null, 2)
        .split("\n")
        .map((line) => `  ${line}`),
    );
    return 0;
  });

import type { Projection } from "./projection.js";

/** One chat as the chats projection holds it: its last run and its latest checkpoint. */
export interface ChatRow {
  readonly chatId: string;
  readonly lastRunId: string;
  /** The latest masked checkpoint of the chat, with the run and step it was taken after. */
  readonly checkpoint: {
    readonly runId: string;
    readonly afterSeq: number;
    readonly state: unknown;
    readonly digest: string;
  } | null;
  readonly position: number;
}

/** The checkpoint per chat. */
export const chatsProjection: Projection<ChatRow> = {
  name: "chats",
  version: 1,
  canHandle: ["run.admitted", "checkpoint.saved"],
  keysOf: (recorded) => ("chatId" in recorded.event ? [String(recorded.event.chatId)] : []),
  // The latest run.admitted and the latest checkpoint.saved of the chat decide the whole row.
  drawsOn: (row) => (row.checkpoint ? [row.lastRunId, row.checkpoint.runId] : [row.lastRunId]),
  evolve: (state, recorded) => {
    const e = recorded.event;
    if (e.type === "run.admitted") {
      return {
        chatId: e.chatId,
        lastRunId: e.runId,
        checkpoint: state?.checkpoint ?? null,
        position: recorded.position,
      };
    }
    if (e.type === "checkpoint.saved") {
      return {
        chatId: e.chatId,
        lastRunId: state?.lastRunId ?? e.runId,
        checkpoint: { runId: e.runId, afterSeq: e.afterSeq, state: e.state, digest: e.digest },
        position: recorded.position,
      };
    }
    if (!state) throw new RangeError(`chats projection cannot start with ${e.type}`);
    return state;
  },
};

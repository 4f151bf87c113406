import { digestOf } from "../events/index.js";
import type { ChatRow } from "../projections/index.js";
import { CheckpointInvalid } from "./errors.js";
import type { JournalReader } from "./Journal.js";

/** The latest checkpoint of a chat: the masked state an agent saved with `turn.checkpoint(...)`. */
export interface ChatCheckpoint {
  readonly chatId: string;
  /** The run that saved it (a later run of the chat without a checkpoint keeps this one). */
  readonly runId: string;
  /** The seq of the last call before it was saved (-1: before the first call). */
  readonly afterSeq: number;
  /** The state as stored: masked, JSON. */
  readonly state: unknown;
  /** SHA-256 of the state's canonical JSON, recorded with it. */
  readonly digest: string;
}

/**
 * Read a chat's latest checkpoint from the chats projection; null when the chat has none (or is not
 * in the journal). A state that does not match its recorded digest is `CheckpointInvalid` (law 11:
 * surfaced, never repaired or skipped).
 */
export const readCheckpoint = async (
  journal: JournalReader,
  chatId: string,
): Promise<ChatCheckpoint | null> => {
  const row = await journal.projection<ChatRow>("chats", chatId);
  if (!row?.checkpoint) return null;
  const { runId, afterSeq, state, digest } = row.checkpoint;
  if (digestOf(state) !== digest) throw new CheckpointInvalid({ chatId, runId, afterSeq });
  return { chatId, runId, afterSeq, state, digest };
};

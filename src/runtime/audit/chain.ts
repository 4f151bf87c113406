import {
  type AnyEvent,
  GRAPH_STREAM_PREFIX,
  graphStreamId,
  QUEUE_STREAM_PREFIX,
  queueStreamId,
  rowHash,
  SCHEDULE_STREAM_PREFIX,
  type StoredRow,
  scheduleStreamId,
} from "../../events/index.js";
import type { AuditFinding } from "./findings.js";

/** Where a stream's chain stands: the highest version seen and its hash. */
export interface ChainHead {
  version: number;
  hash: string;
}

/**
 * Check one row against its stream's chain (DESIGN §4) and move the head on: versions contiguous
 * from 1 in log order, each `prevHash` the previous event's hash, each hash recomputed from the row.
 */
export const checkChain = (row: StoredRow, head: ChainHead): AuditFinding[] => {
  const found: AuditFinding[] = [];
  const at = { streamId: row.streamId, version: row.version, position: row.position };
  const expected = head.version + 1;
  if (row.version !== expected) {
    found.push({
      ...at,
      kind: "version-gap",
      detail:
        row.version > expected
          ? `expected version ${expected}, found ${row.version}: ${row.version - expected} event(s) missing before it`
          : `version ${row.version} comes after version ${head.version} in the log: events out of order or repeated`,
    });
  } else if (row.prevHash !== head.hash) {
    found.push({ ...at, kind: "prev-hash-mismatch", detail: "prevHash is not the previous event's hash" });
  }
  if (rowHash(row) !== row.hash)
    found.push({ ...at, kind: "hash-mismatch", detail: "the stored row does not hash to its hash" });
  // A row out of order does not move the chain on: the rows after it still chain to the highest.
  if (row.version > head.version) {
    head.version = row.version;
    head.hash = row.hash;
  }
  return found;
};

const SYSTEM_TYPES = new Set(["journal.opened", "retention.pruned", "backup.written", "outcome.orphaned"]);
const DOCUMENT_TYPES = new Set(["document.replaced", "document.conflicted"]);
const GRAPH_TYPES = new Set(["graph.checkpointed", "graph.writes-recorded"]);
const QUEUE_TYPES = new Set(["input.queued", "input.admitted", "input.withdrawn"]);
const SCHEDULE_TYPES = new Set([
  "schedule.upserted",
  "schedule.paused",
  "schedule.resumed",
  "schedule.deleted",
  "schedule.ticked",
  "schedule.tick-corrected",
]);

/** Why an event does not belong in its stream, or null. */
export const misplaced = (streamId: string, event: AnyEvent): string | null => {
  if (streamId.startsWith("run-")) {
    if (!("runId" in event) || SYSTEM_TYPES.has(event.type) || DOCUMENT_TYPES.has(event.type))
      return `${event.type} does not belong in a run stream`;
    if (`run-${event.runId}` !== streamId) return `${event.type} names run ${event.runId}`;
    return null;
  }
  if (streamId.startsWith("chat-")) {
    if (!DOCUMENT_TYPES.has(event.type) || !("chatId" in event))
      return `${event.type} does not belong in a chat stream`;
    return `chat-${event.chatId}` === streamId ? null : `${event.type} names chat ${event.chatId}`;
  }
  if (streamId.startsWith(GRAPH_STREAM_PREFIX)) {
    if (!GRAPH_TYPES.has(event.type) || !("threadId" in event))
      return `${event.type} does not belong in a LangGraph thread stream`;
    return graphStreamId(event.threadId) === streamId ? null : `${event.type} names thread ${event.threadId}`;
  }
  if (streamId.startsWith(QUEUE_STREAM_PREFIX)) {
    if (!QUEUE_TYPES.has(event.type) || !("chatId" in event))
      return `${event.type} does not belong in a chat's queue stream`;
    return queueStreamId(event.chatId) === streamId ? null : `${event.type} names chat ${event.chatId}`;
  }
  if (streamId.startsWith(SCHEDULE_STREAM_PREFIX)) {
    if (!SCHEDULE_TYPES.has(event.type) || !("scheduleId" in event))
      return `${event.type} does not belong in a schedule stream`;
    return scheduleStreamId(event.scheduleId) === streamId
      ? null
      : `${event.type} names schedule ${event.scheduleId}`;
  }
  if (streamId === "system")
    return SYSTEM_TYPES.has(event.type) ? null : `${event.type} does not belong in the system stream`;
  return "holdfast writes only run-…, chat-…, queue-…, schedule-…, langgraph-… and system streams";
};

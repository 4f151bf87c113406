import type { GraphChannel, GraphValue } from "../events/index.js";
import type { Projection } from "./projection.js";

/** A stored pending write of a LangGraph task. */
export interface GraphWriteRow {
  readonly taskId: string;
  readonly taskPath: string;
  readonly idx: number;
  readonly channel: string;
  readonly value: GraphValue;
}

export interface GraphCheckpointRow {
  readonly threadId: string;
  readonly namespace: string;
  readonly checkpointId: string;
  readonly parentId: string | null;
  /** Absent while only writes were recorded against the checkpoint. */
  readonly state: { readonly checkpoint: GraphValue; readonly metadata: GraphValue } | null;
  readonly writes: ReadonlyArray<GraphWriteRow>;
  readonly position: number;
}

export interface GraphThreadRow {
  readonly threadId: string;
  readonly namespace: string;
  /** The greatest checkpoint id (LangGraph's ids sort by time). */
  readonly latest: string;
  readonly position: number;
}

/** A checkpoint's row key; keys of one thread share {@link graphThreadPrefix}. */
export const graphCheckpointKey = (threadId: string, namespace: string, checkpointId: string): string =>
  JSON.stringify([threadId, namespace, checkpointId]);

/** A channel value's row key in `graph-channels`. */
export const graphChannelKey = (
  threadId: string,
  namespace: string,
  channel: string,
  version: string | number,
): string => JSON.stringify([threadId, namespace, channel, String(version)]);

/** A thread namespace's row key in `graph-threads`. */
export const graphThreadKey = (threadId: string, namespace: string): string =>
  JSON.stringify([threadId, namespace]);

/** What every key of one thread starts with, in both graph projections. */
export const graphThreadPrefix = (threadId: string): string => `${JSON.stringify([threadId]).slice(0, -1)},`;

const mergeWrites = (
  stored: ReadonlyArray<GraphWriteRow>,
  added: ReadonlyArray<GraphWriteRow>,
): ReadonlyArray<GraphWriteRow> => {
  const out = [...stored];
  for (const write of added) {
    const at = out.findIndex((w) => w.taskId === write.taskId && w.idx === write.idx);
    // A task's regular write is kept as first recorded (a re-run task writes the same); the special
    // channels (negative indexes: error, interrupt, resume…) are replaced by the latest.
    if (at === -1) out.push(write);
    else if (write.idx < 0) out[at] = write;
  }
  return out;
};

/** Every LangGraph checkpoint with its pending writes: `getTuple` by id and `list` read these rows. */
export const graphCheckpointsProjection: Projection<GraphCheckpointRow> = {
  name: "graph-checkpoints",
  version: 1,
  canHandle: ["graph.checkpointed", "graph.writes-recorded"],
  keysOf: (recorded) => {
    const e = recorded.event;
    return e.type === "graph.checkpointed" || e.type === "graph.writes-recorded"
      ? [graphCheckpointKey(e.threadId, e.namespace, e.checkpointId)]
      : [];
  },
  evolve: (state, recorded) => {
    const e = recorded.event;
    if (e.type === "graph.checkpointed")
      return {
        threadId: e.threadId,
        namespace: e.namespace,
        checkpointId: e.checkpointId,
        parentId: e.parentId,
        state: { checkpoint: e.state.checkpoint, metadata: e.state.metadata },
        writes: state?.writes ?? [],
        position: recorded.position,
      };
    if (e.type === "graph.writes-recorded")
      return {
        threadId: e.threadId,
        namespace: e.namespace,
        checkpointId: e.checkpointId,
        parentId: state?.parentId ?? null,
        state: state?.state ?? null,
        writes: mergeWrites(
          state?.writes ?? [],
          e.value.map((w) => ({ taskId: e.taskId, taskPath: e.taskPath, ...w })),
        ),
        position: recorded.position,
      };
    if (!state) throw new RangeError(`graph-checkpoints projection cannot start with ${e.type}`);
    return state;
  },
};

/** The latest checkpoint of each thread and namespace: `getTuple` without an id reads it. */
export const graphThreadsProjection: Projection<GraphThreadRow> = {
  name: "graph-threads",
  version: 1,
  canHandle: ["graph.checkpointed"],
  keysOf: (recorded) => {
    const e = recorded.event;
    return e.type === "graph.checkpointed" ? [graphThreadKey(e.threadId, e.namespace)] : [];
  },
  evolve: (state, recorded) => {
    const e = recorded.event;
    if (e.type !== "graph.checkpointed") {
      if (!state) throw new RangeError(`graph-threads projection cannot start with ${e.type}`);
      return state;
    }
    if (state && state.latest > e.checkpointId) return { ...state, position: recorded.position };
    return {
      threadId: e.threadId,
      namespace: e.namespace,
      latest: e.checkpointId,
      position: recorded.position,
    };
  },
};

export interface GraphChannelRow extends GraphChannel {
  readonly position: number;
}

/** Each channel value at each version, as the checkpoint that changed it stored it (the first one kept). */
export const graphChannelsProjection: Projection<GraphChannelRow> = {
  name: "graph-channels",
  version: 1,
  canHandle: ["graph.checkpointed"],
  keysOf: (recorded) => {
    const e = recorded.event;
    return e.type === "graph.checkpointed"
      ? e.state.channels.map((c) => graphChannelKey(e.threadId, e.namespace, c.channel, c.version))
      : [];
  },
  evolve: (state, recorded, key) => {
    if (state) return state;
    const e = recorded.event;
    const channel =
      e.type === "graph.checkpointed"
        ? e.state.channels.find((c) => graphChannelKey(e.threadId, e.namespace, c.channel, c.version) === key)
        : undefined;
    if (!channel) throw new RangeError(`graph-channels projection has no channel for ${key} in ${e.type}`);
    return { ...channel, position: recorded.position };
  },
};

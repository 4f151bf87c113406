import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";
import {
  type AnyEvent,
  type GraphChannel,
  type GraphValue,
  graphStreamId,
  type Masker,
  makeMasker,
  masksWhole,
  maskToken,
} from "../../../events/index.js";
import {
  type GraphChannelRow,
  type GraphCheckpointRow,
  type GraphThreadRow,
  graphChannelKey,
  graphChannelsProjection,
  graphCheckpointKey,
  graphCheckpointsProjection,
  graphThreadKey,
  graphThreadPrefix,
  graphThreadsProjection,
} from "../../../projections/index.js";
import { InvalidInput } from "../../../runtime/errors.js";
import type { Journal } from "../../../runtime/Journal.js";
import { openStore } from "../../store.js";

/** What {@link HoldfastSaver.open} takes. */
export interface HoldfastSaverOptions {
  /**
   * The journal: a libSQL file path or a `postgres://` URL (default `HOLDFAST_STORE`, else
   * `.holdfast/journal.db`). Use the runtime's store to keep graph state and calls in one log.
   */
  readonly store?: string;
  /** Secret values to mask in checkpoints and writes before anything is written, by name. */
  readonly secrets?: Readonly<Record<string, string>>;
  /** LangGraph's serializer (default: its JSON-plus serializer). */
  readonly serde?: SerializerProtocol;
}

/** Rows of one projection are read this many at a time. */
const PAGE = 500;

const decoder = new TextDecoder();
const encoder = new TextEncoder();
/** Strict, and keeps a byte-order mark: text decoded here must encode back to the same bytes. */
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const utf8 = (bytes: Uint8Array): string | null => {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return null;
  }
};

const threadIdOf = (config: RunnableConfig): string | undefined => {
  const id: unknown = config.configurable?.thread_id;
  return id === undefined || id === null ? undefined : String(id);
};

/**
 * A LangGraph checkpointer on the holdfast journal: every checkpoint and every task's pending writes
 * is an event in the thread's stream `langgraph-<threadId>` — hash-chained, masked before it is
 * written, sealed when `HOLDFAST_ENCRYPTION_KEY` is set, verified by `holdfast audit`. Two inline
 * projections answer `getTuple` and `list` without reading the streams. `deleteThread` removes the
 * stream and leaves its head in a `retention.pruned` event, as retention does for runs; the thread
 * id can then be used again, and its stream begins again at version 1.
 *
 * @example
 * import { StateGraph } from "@langchain/langgraph";
 * import { HoldfastSaver } from "holdfast/langgraph";
 *
 * const checkpointer = await HoldfastSaver.open({ store: ".holdfast/journal.db" });
 * const app = graph.compile({ checkpointer });
 * await app.invoke(input, { configurable: { thread_id: "chat-42" } });
 * await checkpointer.close();
 */
export class HoldfastSaver extends BaseCheckpointSaver {
  private constructor(
    private readonly journal: Journal,
    private readonly masker: Masker,
    serde?: SerializerProtocol,
  ) {
    super(serde);
  }

  /**
   * Open a saver on a journal (created when missing).
   *
   * @example
   * const checkpointer = await HoldfastSaver.open({ store: process.env.HOLDFAST_STORE, secrets: { api: key } });
   */
  static async open(options: HoldfastSaverOptions = {}): Promise<HoldfastSaver> {
    const journal = await openStore(options.store);
    return new HoldfastSaver(journal, makeMasker(options.secrets), options.serde);
  }

  /**
   * Close the saver's journal connection.
   *
   * @example
   * await checkpointer.close();
   */
  async close(): Promise<void> {
    await this.journal.close();
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = threadIdOf(config);
    if (threadId === undefined) return undefined;
    const namespace: string = config.configurable?.checkpoint_ns ?? "";
    let checkpointId: string | undefined = getCheckpointId(config) || undefined;
    if (checkpointId === undefined) {
      const thread = await this.journal.projection<GraphThreadRow>(
        graphThreadsProjection.name,
        graphThreadKey(threadId, namespace),
      );
      if (!thread) return undefined;
      checkpointId = thread.latest;
    }
    const row = await this.journal.projection<GraphCheckpointRow>(
      graphCheckpointsProjection.name,
      graphCheckpointKey(threadId, namespace, checkpointId),
    );
    if (!row?.state) return undefined;
    return this.toTuple(row, getCheckpointId(config) ? config : undefined);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const threadId = threadIdOf(config);
    const namespace: string | undefined = config.configurable?.checkpoint_ns;
    const checkpointId: string | undefined = config.configurable?.checkpoint_id || undefined;
    const before: string | undefined = options?.before?.configurable?.checkpoint_id || undefined;
    const filter = options?.filter;
    let limit = options?.limit;
    const rows = (await this.checkpointRows(threadId))
      .filter(
        (row) =>
          row.state !== null &&
          (namespace === undefined || row.namespace === namespace) &&
          (checkpointId === undefined || row.checkpointId === checkpointId) &&
          (before === undefined || row.checkpointId < before),
      )
      .sort(
        (a, b) =>
          compare(a.threadId, b.threadId) ||
          compare(a.namespace, b.namespace) ||
          compare(b.checkpointId, a.checkpointId),
      );
    for (const row of rows) {
      if (limit !== undefined && limit <= 0) return;
      const tuple = await this.toTuple(row, undefined);
      const metadata = (tuple.metadata ?? {}) as Record<string, unknown>;
      if (filter && !Object.entries(filter).every(([key, value]) => metadata[key] === value)) continue;
      if (limit !== undefined) limit -= 1;
      yield tuple;
    }
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const threadId = threadIdOf(config);
    if (threadId === undefined)
      throw new Error(
        'Failed to put checkpoint: the config has no "thread_id" in "configurable". Pass one, e.g. graph.invoke(input, { configurable: { thread_id: "chat-42" } }).',
      );
    const namespace: string = config.configurable?.checkpoint_ns ?? "";
    // As LangGraph's PostgreSQL saver does: a checkpoint names channel versions, and a channel's
    // value is stored once, by the checkpoint whose `newVersions` changed it.
    const stored = copyCheckpoint(checkpoint);
    const values = stored.channel_values ?? {};
    stored.channel_values = {};
    const channels: GraphChannel[] = [];
    for (const [channel, version] of Object.entries(newVersions))
      if (channel in values)
        channels.push({
          channel: this.masker.maskString(channel),
          version,
          value: await this.dumpUnder(channel, values[channel]),
        });
    const event: AnyEvent = {
      type: "graph.checkpointed",
      threadId,
      namespace,
      checkpointId: checkpoint.id,
      parentId: config.configurable?.checkpoint_id ?? null,
      state: {
        checkpoint: this.maskCheckpoint(await this.dump(stored, "the checkpoint")),
        metadata: this.mask(await this.dump(metadata, "the checkpoint's metadata")),
        channels,
      },
    };
    await this.journal.append({ streamId: graphStreamId(threadId), expectedVersion: "any", events: [event] });
    return { configurable: { thread_id: threadId, checkpoint_ns: namespace, checkpoint_id: checkpoint.id } };
  }

  async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath?: string,
  ): Promise<void> {
    const threadId = threadIdOf(config);
    const checkpointId: string | undefined = config.configurable?.checkpoint_id;
    if (threadId === undefined || checkpointId === undefined)
      throw new Error(
        'Failed to put writes: the config needs "thread_id" and "checkpoint_id" in "configurable"; pass the config put() returned.',
      );
    const value = await Promise.all(
      writes.map(async ([channel, written], idx) => ({
        idx: WRITES_IDX_MAP[channel] ?? idx,
        channel: this.masker.maskString(channel),
        value: await this.dumpUnder(channel, written),
      })),
    );
    const event: AnyEvent = {
      type: "graph.writes-recorded",
      threadId,
      namespace: config.configurable?.checkpoint_ns ?? "",
      checkpointId,
      taskId,
      taskPath: taskPath ?? "",
      value,
    };
    await this.journal.append({ streamId: graphStreamId(threadId), expectedVersion: "any", events: [event] });
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.journal.dropStream(graphStreamId(String(threadId)));
  }

  private async checkpointRows(threadId: string | undefined): Promise<GraphCheckpointRow[]> {
    const name = graphCheckpointsProjection.name;
    if (threadId === undefined) return [...(await this.journal.projectionRows<GraphCheckpointRow>(name))];
    const prefix = graphThreadPrefix(threadId);
    const rows: GraphCheckpointRow[] = [];
    let after = prefix;
    for (;;) {
      const page = await this.journal.projectionPage(name, { after, limit: PAGE });
      for (const row of page) {
        if (!row.key.startsWith(prefix)) return rows;
        rows.push(JSON.parse(row.value) as GraphCheckpointRow);
      }
      const last = page.at(-1);
      if (!last || page.length < PAGE) return rows;
      after = last.key;
    }
  }

  private async toTuple(
    row: GraphCheckpointRow,
    config: RunnableConfig | undefined,
  ): Promise<CheckpointTuple> {
    const { threadId, namespace, checkpointId, parentId } = row;
    const state = row.state!;
    const checkpoint = (await this.load(state.checkpoint)) as Checkpoint;
    checkpoint.channel_values = await this.channelValues(row, checkpoint.channel_versions ?? {});
    if (checkpoint.v < 4 && parentId !== null) await this.migratePendingSends(checkpoint, row);
    const ordered = [...row.writes].sort((a, b) =>
      compareWritesSortKeys(
        writesSortKey(a.taskPath, a.taskId, a.idx),
        writesSortKey(b.taskPath, b.taskId, b.idx),
      ),
    );
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      ordered.map(
        async (w): Promise<CheckpointPendingWrite> => [w.taskId, w.channel, await this.load(w.value)],
      ),
    );
    const tuple: CheckpointTuple = {
      config: config ?? {
        configurable: { thread_id: threadId, checkpoint_ns: namespace, checkpoint_id: checkpointId },
      },
      checkpoint,
      metadata: (await this.load(state.metadata)) as CheckpointMetadata,
      pendingWrites,
    };
    if (parentId !== null)
      tuple.parentConfig = {
        configurable: { thread_id: threadId, checkpoint_ns: namespace, checkpoint_id: parentId },
      };
    return tuple;
  }

  private async channelValues(
    row: GraphCheckpointRow,
    versions: ChannelVersions,
  ): Promise<Record<string, unknown>> {
    const values: Record<string, unknown> = {};
    for (const [channel, version] of Object.entries(versions)) {
      const stored = await this.journal.projection<GraphChannelRow>(
        graphChannelsProjection.name,
        graphChannelKey(row.threadId, row.namespace, channel, version),
      );
      if (stored) values[channel] = await this.load(stored.value);
    }
    return values;
  }

  /** Checkpoints before format 4 kept pending sends as the parent's TASKS writes; LangGraph expects them in the channel. */
  private async migratePendingSends(checkpoint: Checkpoint, row: GraphCheckpointRow): Promise<void> {
    const parent = await this.journal.projection<GraphCheckpointRow>(
      graphCheckpointsProjection.name,
      graphCheckpointKey(row.threadId, row.namespace, row.parentId!),
    );
    const sends = await Promise.all(
      (parent?.writes ?? []).filter((w) => w.channel === TASKS).map((w) => this.load(w.value)),
    );
    const mutable = checkpoint as {
      channel_values: Record<string, unknown>;
      channel_versions: ChannelVersions;
    };
    mutable.channel_values ??= {};
    mutable.channel_values[TASKS] = sends;
    mutable.channel_versions ??= {};
    const versions = Object.values(mutable.channel_versions);
    mutable.channel_versions[TASKS] =
      versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  /**
   * A channel's value, masked. A state key reaches the journal as a channel name, a value
   * (`{ channel: "password", value }`) that masking by key name never sees: the value is replaced
   * whole as the masker replaces the value of a key of that name.
   */
  private async dumpUnder(channel: string, value: unknown): Promise<GraphValue> {
    if (masksWhole(channel, value)) return { kind: "json", json: maskToken(channel) };
    return this.mask(await this.dump(value, `channel "${channel}"`));
  }

  /**
   * The versions are left to string masking only: they are keyed by channel name, and a channel
   * named like a secret (`password`) would lose its version, and with it its value.
   */
  private maskCheckpoint(value: GraphValue): GraphValue {
    if (
      value.kind !== "json" ||
      value.json === null ||
      typeof value.json !== "object" ||
      Array.isArray(value.json)
    )
      return this.mask(value);
    const { channel_versions, versions_seen, ...rest } = value.json as Record<string, unknown>;
    const json: Record<string, unknown> = this.masker.mask(rest);
    if (channel_versions !== undefined) json.channel_versions = this.masker.maskStrings(channel_versions);
    if (versions_seen !== undefined) json.versions_seen = this.masker.maskStrings(versions_seen);
    return { kind: "json", json };
  }

  /** Binary is left whole: it was refused if it held a registered secret, and masking base64 only garbles it. */
  private mask(value: GraphValue): GraphValue {
    if (value.kind === "json") return { kind: "json", json: this.masker.mask(value.json) };
    if (value.kind === "text") return { ...value, text: this.masker.maskString(value.text) };
    return value;
  }

  private async dump(value: unknown, what: string): Promise<GraphValue> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    if (type === "json") return { kind: "json", json: JSON.parse(decoder.decode(bytes)) };
    const text = utf8(bytes);
    if (text !== null) return { kind: "text", type, text };
    const secret = this.masker.registeredIn(bytes);
    if (secret !== null)
      throw new InvalidInput({
        what,
        detail: `the serializer stored it as binary ("${type}") that holds the registered secret "${secret}", which cannot be masked inside binary. Nothing was written; keep the secret out of the graph's state, or store it as text`,
      });
    return { kind: "bytes", type, base64: Buffer.from(bytes).toString("base64") };
  }

  private load(value: GraphValue): Promise<unknown> {
    if (value.kind === "json") return this.serde.loadsTyped("json", JSON.stringify(value.json));
    if (value.kind === "text") return this.serde.loadsTyped(value.type, encoder.encode(value.text));
    return this.serde.loadsTyped(value.type, new Uint8Array(Buffer.from(value.base64, "base64")));
  }
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

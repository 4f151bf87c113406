/** Calls per chunk: a change copies one chunk and the list of chunks, never every call. */
const CHUNK = 64;
/** Seqs from here on (a damaged log, not a real run) are kept aside rather than in a huge spine. */
const MAX_SEQ = 1 << 20;

/** `<runId>/<seq>` → seq, when the id has that shape for this table's run; else null. */
const seqOf = (runId: string | null, callId: string): number | null => {
  const slash = callId.lastIndexOf("/");
  if (slash <= 0 || (runId !== null && callId.slice(0, slash) !== runId)) return null;
  const digits = callId.slice(slash + 1);
  if (digits === "" || digits.length > 7 || !/^(0|[1-9][0-9]*)$/.test(digits)) return null;
  const seq = Number(digits);
  return seq < MAX_SEQ ? seq : null;
};

/**
 * The calls of a run, by call id: an immutable value, as the run's context is. Recording one call
 * (`with`) shares everything it does not change — the calls are kept in chunks of 64 by their
 * `seq` — so a run with thousands of calls does not copy all of them on every event, which made a
 * long run's calls slower the longer it ran. A call id that is not `<runId>/<seq>` (an older or
 * damaged log) is kept aside, copied on change; there are none in logs holdfast writes.
 * Iteration is in `seq` order, then the others in the order they came.
 */
/** What the table needs of a call: its id (`CallState` in the run context). */
interface Keyed {
  readonly callId: string;
}

export class CallTable<CallState extends Keyed = Keyed> {
  // biome-ignore lint/suspicious/noExplicitAny: the empty table holds no call, so it is every table's
  static readonly empty: CallTable<any> = new CallTable(null, [], new Map(), 0);

  private constructor(
    /** The run all `<runId>/<seq>` ids belong to; fixed by the first such id. */
    private readonly runId: string | null,
    private readonly chunks: ReadonlyArray<ReadonlyArray<CallState | undefined> | undefined>,
    private readonly others: ReadonlyMap<string, CallState>,
    readonly size: number,
  ) {}

  get(callId: string): CallState | undefined {
    const seq = seqOf(this.runId, callId);
    if (seq === null || this.runId === null) return this.others.get(callId);
    return this.chunks[Math.floor(seq / CHUNK)]?.[seq % CHUNK];
  }

  has(callId: string): boolean {
    return this.get(callId) !== undefined;
  }

  /** A table with `call` recorded under its id (added, or replacing the call of that id). */
  with(call: CallState): CallTable<CallState> {
    const existed = this.has(call.callId);
    const size = existed ? this.size : this.size + 1;
    const runId = this.runId ?? runIdOf(call.callId);
    const seq = runId === null ? null : seqOf(runId, call.callId);
    if (seq === null) {
      const others = new Map(this.others);
      others.set(call.callId, call);
      return new CallTable(this.runId, this.chunks, others, size);
    }
    const at = Math.floor(seq / CHUNK);
    const chunks = this.chunks.slice();
    const chunk = chunks[at]?.slice() ?? new Array<CallState | undefined>(CHUNK).fill(undefined);
    chunk[seq % CHUNK] = call;
    chunks[at] = chunk;
    return new CallTable(runId, chunks, this.others, size);
  }

  /** Every call, in `seq` order (then any other ids in the order they came). */
  values(): CallState[] {
    const out: CallState[] = [];
    for (const chunk of this.chunks) if (chunk) for (const call of chunk) if (call) out.push(call);
    for (const call of this.others.values()) out.push(call);
    return out;
  }

  [Symbol.iterator](): Iterator<CallState> {
    return this.values()[Symbol.iterator]();
  }

  /** As JSON: an object by call id, as the context held them before (views, logs, test output). */
  toJSON(): Record<string, CallState> {
    return Object.fromEntries(this.values().map((call) => [call.callId, call]));
  }
}

/** The run id of a `<runId>/<seq>` call id, or null for any other shape. */
const runIdOf = (callId: string): string | null => {
  const slash = callId.lastIndexOf("/");
  return slash > 0 && seqOf(callId.slice(0, slash), callId) !== null ? callId.slice(0, slash) : null;
};

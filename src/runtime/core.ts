import type { Masker } from "../events/index.js";
import type { AgentRegistry } from "./agents.js";
import type { AnyToolDef } from "./define.js";
import type { ExecuteDeps, RunResult } from "./execute.js";
import type { Claim, Journal } from "./Journal.js";
import type { Ownership } from "./ownership.js";

/**
 * What `whenBusy: "interrupt"` needs: cancel the chat's active run (it then ends `cancelled` and the
 * input, queued first, is admitted after it). The engine's own `cancel` by default (a held run
 * takes the `stop` decision, decision 0043).
 */
export interface Interrupter {
  cancelForInterrupt(chatId: string, runId: string): Promise<void>;
}

/** What admission, recovery and decisions share: the engine's state, behind one small interface. */
export interface EngineCore {
  readonly journal: Journal;
  readonly masker: Masker;
  readonly workerId: string;
  readonly leaseMs: number;
  /** The agents this runtime executes, by name and version (decision 0062). */
  readonly agents: AgentRegistry;
  readonly tools: ReadonlyMap<string, AnyToolDef>;
  /** The safe list: tool name → pinned SHA-256 of its source. */
  readonly allowlist: Readonly<Record<string, string>>;
  readonly ownership: Ownership;
  readonly executeDeps: ExecuteDeps;
  readonly maxRetryAttempts: number;
  /** Interruptions with no outcome or decision in between after which a run is held `crash-loop`. */
  readonly maxInterruptions: number;
  newRunId(): string;
  /** Set once `close` began: no new run is started from a queue, watchers stop. */
  readonly closing: boolean;
  /**
   * A run of the chat ended (or its queue changed): admit the chat's next queued input if the chat
   * is free. Never throws: what it could not admit, the next recovery pass does.
   */
  runEnded(chatId: string): Promise<void>;
  /** Cancel the chat's active run for `whenBusy: "interrupt"` (see {@link Interrupter}). */
  cancelForInterrupt(chatId: string, runId: string): Promise<void>;
  /** Whether this runtime is executing the run now. */
  isLive(runId: string): boolean;
  /**
   * Execute a run this runtime claimed; its claim is renewed until the execution settles, then
   * released. `limited` runs wait for a recovery slot (children never do: a parent may wait on them).
   */
  start(
    runId: string,
    execution: () => Promise<RunResult>,
    options?: { readonly limited?: boolean },
  ): Promise<RunResult>;
  /** The result of a run: its live promise here, or what the journal says now. */
  wait(runId: string): Promise<RunResult>;
  /**
   * Whether this runtime's own execution of the run stopped for a journal outage and `claim` is
   * this runtime taking it back with nobody else's claim in between (decision 0086). Asked once per
   * re-claim: the answer is forgotten.
   */
  stoppedForJournal(runId: string, claim: Claim & { readonly previous: Claim | null }): boolean;
}

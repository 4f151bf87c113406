import type { LivenessSnapshot, RuntimePresence } from "./Journal.js";

/*
 * What a reader can say about who runs a run (decisions 0052, 0053): its owner, the owner's lease
 * and last heartbeat, whether the owner is provably gone (stalled), and what happens next. Pure:
 * the claims, the presence rows and the clock come in a snapshot; whether a worker id names a
 * dead process of this host comes as a function (only the adapters can look).
 */

/** A run's owner: the full worker id, and the host and pid it names (null where it names none). */
export interface RunOwner {
  readonly workerId: string;
  readonly host: string | null;
  readonly pid: number | null;
}

/** Why a run is stalled: its owner's lease ran out, its owner's process is gone, or nobody owns it. */
export type StalledBecause = "lease-expired" | "owner-dead" | "no-owner";

/**
 * Why an active run waits with nothing to run it, beyond its status (decision 0063):
 * `agent-version-missing` — live runtimes have its agent, but none the version that admitted it.
 */
export type WaitReason = "agent-version-missing";

/** Who runs a run now, as a reader sees it. Every time is ISO 8601. */
export interface RunLiveness {
  /** The worker that holds the run's claim; null when none does. */
  readonly owner: RunOwner | null;
  readonly leaseExpiresAt: string | null;
  /** The owner's last heartbeat (its runtime's presence row); null when it left none. */
  readonly lastHeartbeatAt: string | null;
  /** An active run whose owner is provably gone, or that nobody owns: nothing runs it. */
  readonly stalled: boolean;
  readonly stalledBecause: StalledBecause | null;
  /** Since when nothing runs it: the owner's last heartbeat, or the run's last event. */
  readonly stalledSince: string | null;
  /**
   * `agent-version-missing`: a running, interrupted or waiting run with no live owner, whose agent
   * live runtimes have only in other versions ({@link RunLiveness.versionsLive}). They leave it
   * alone; it continues when a runtime with its version opens this journal (decision 0063).
   */
  readonly waitReason: WaitReason | null;
  /** With `agent-version-missing`: the versions of its agent live now (`name@version`), else empty. */
  readonly versionsLive: ReadonlyArray<string>;
}

/** A live runtime that has a run's agent. */
export interface LiveRuntime {
  readonly workerId: string;
  readonly host: string;
  readonly pid: number;
  /** The agent as that runtime has it (`name@version`). */
  readonly agent: string;
  /** How often it runs a recovery pass; null: only when it opens. */
  readonly recoversEveryMs: number | null;
}

/** What happens next to a run, for the CLI, the API and the panel alike. */
export interface NextStep {
  /** The agent that continues the run (`name@version`). */
  readonly agent: string;
  /** Whether a runtime that continues the run is live now (the owner, or one with the agent). */
  readonly live: boolean;
  /** The live runtimes with the agent. */
  readonly runtimes: ReadonlyArray<LiveRuntime>;
  /** The sentence: which runtime continues the run and whether one is live now. */
  readonly text: string;
}

/** Statuses a runtime is meant to be executing: the ones a dead owner leaves stuck. */
const ACTIVE: ReadonlySet<string> = new Set(["running", "interrupted"]);

/** Statuses a runtime with the run's agent version continues on its own (a recovery or a wake). */
const CONTINUED: ReadonlySet<string> = new Set(["running", "interrupted", "waiting"]);

/** `<host>:<pid>:…`, the shape of the ids holdfast makes (custom ids name no host). */
const HOST_PID = /^([^:]+):(\d+):/;

/** The host and pid a worker id names, from its presence row or its own text. */
export const ownerOf = (workerId: string, runtimes: ReadonlyArray<RuntimePresence>): RunOwner => {
  const row = runtimes.find((r) => r.workerId === workerId);
  if (row) return { workerId, host: row.host, pid: row.pid };
  const parsed = HOST_PID.exec(workerId);
  return parsed
    ? { workerId, host: parsed[1] ?? null, pid: Number(parsed[2]) }
    : { workerId, host: null, pid: null };
};

/** `web-1 pid 4242`, or the worker id when it names no host. */
export const ownerText = (owner: RunOwner): string =>
  owner.host !== null && owner.pid !== null ? `${owner.host} pid ${owner.pid}` : owner.workerId;

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Who runs a run now. Only `running` and `interrupted` runs have an owner to look at; a held,
 * paused or finished run is never stalled (it waits for a person, or is done).
 */
export const livenessOf = (
  run: {
    readonly runId: string;
    readonly status: string;
    readonly updatedAt: string;
    /** `name@version`: without it, whether its version is live is not looked at. */
    readonly agent?: string;
  },
  snapshot: LivenessSnapshot,
  isWorkerDead: (workerId: string) => boolean,
): RunLiveness => {
  const live = ownerLiveness(run, snapshot, isWorkerDead);
  if (run.agent === undefined || !CONTINUED.has(run.status) || (live.owner && !live.stalled)) return live;
  const versionsLive = otherVersionsLive(run.agent, snapshot, isWorkerDead);
  return versionsLive.length > 0 ? { ...live, waitReason: "agent-version-missing", versionsLive } : live;
};

/**
 * The versions of a run's agent that live runtimes have (`name@version`), when none has the run's
 * own: empty when one has it, or when none has the agent at all.
 */
export const otherVersionsLive = (
  agent: string,
  snapshot: LivenessSnapshot,
  isWorkerDead: (workerId: string) => boolean,
): string[] => {
  const name = agentName(agent);
  const live = snapshot.runtimes.filter((r) => r.expiresAt > snapshot.now && !isWorkerDead(r.workerId));
  if (live.some((r) => r.agents.includes(agent))) return [];
  return [...new Set(live.flatMap((r) => r.agents.filter((a) => agentName(a) === name)))].sort();
};

const ownerLiveness = (
  run: { readonly runId: string; readonly status: string; readonly updatedAt: string },
  snapshot: LivenessSnapshot,
  isWorkerDead: (workerId: string) => boolean,
): RunLiveness => {
  const none: RunLiveness = {
    owner: null,
    leaseExpiresAt: null,
    lastHeartbeatAt: null,
    stalled: false,
    stalledBecause: null,
    stalledSince: null,
    waitReason: null,
    versionsLive: [],
  };
  const claim = snapshot.claims.find((c) => c.runId === run.runId);
  if (!ACTIVE.has(run.status)) return none;
  if (!claim) return { ...none, stalled: true, stalledBecause: "no-owner", stalledSince: run.updatedAt };
  const presence = snapshot.runtimes.find((r) => r.workerId === claim.workerId);
  const lastHeartbeatAt = presence ? iso(presence.seenAt) : null;
  const owned: RunLiveness = {
    ...none,
    owner: ownerOf(claim.workerId, snapshot.runtimes),
    leaseExpiresAt: iso(claim.leaseUntil),
    lastHeartbeatAt,
  };
  const because: StalledBecause | null =
    claim.leaseUntil <= snapshot.now ? "lease-expired" : isWorkerDead(claim.workerId) ? "owner-dead" : null;
  if (!because) return owned;
  return {
    ...owned,
    stalled: true,
    stalledBecause: because,
    stalledSince: lastHeartbeatAt ?? (because === "lease-expired" ? iso(claim.leaseUntil) : run.updatedAt),
  };
};

/**
 * The live runtimes that have the agent in the run's version (`name@version`, as recovery and the
 * wake pass match it, decision 0062), live ones only.
 */
export const liveRuntimesFor = (
  agent: string,
  snapshot: LivenessSnapshot,
  isWorkerDead: (workerId: string) => boolean,
): LiveRuntime[] =>
  snapshot.runtimes.flatMap((r): LiveRuntime[] => {
    if (r.expiresAt <= snapshot.now || isWorkerDead(r.workerId)) return [];
    return r.agents.includes(agent)
      ? [{ workerId: r.workerId, host: r.host, pid: r.pid, agent, recoversEveryMs: r.recoversEveryMs }]
      : [];
  });

const agentName = (agent: string): string => {
  const at = agent.lastIndexOf("@");
  return at > 0 ? agent.slice(0, at) : agent;
};

/** What a run in each status waits for, when nothing executes it. */
const SETTLED: Readonly<Record<string, string>> = {
  completed: "the run is completed; nothing more runs",
  failed: "the run failed; nothing more runs",
  stopped: "the run is stopped; nothing more runs, and its chat takes new input",
  cancelled: "the run is cancelled; nothing more runs, and its chat takes new input",
  held: "the run is still held: a call in doubt has no decision yet",
  paused: "the run is paused: nothing runs it until it is resumed",
};

/**
 * The one sentence the CLI, the API and the panel say after an action (and the confirm page before
 * it): which runtime continues the run and whether one is live now. `status` is the run's status
 * after the action; `owner` its live owner, if any; `hint` is added where no runtime is live (the
 * CLI's way to start one for demo runs).
 *
 * @example
 * whatHappensNext({ status: "running", agent: "demo@1", owner: null, runtimes: [] }).text
 * // 'no runtime with agent "demo@1" is live now: the run continues when one opens this journal …'
 */
export const whatHappensNext = (input: {
  readonly status: string;
  readonly agent: string;
  readonly owner: RunOwner | null;
  readonly runtimes: ReadonlyArray<LiveRuntime>;
  /** Other versions of the agent live now, when none has the run's (decision 0063). */
  readonly versionsLive?: ReadonlyArray<string>;
  readonly hint?: string;
}): NextStep => {
  const { agent, owner, runtimes } = input;
  const missing =
    input.versionsLive && input.versionsLive.length > 0
      ? ` (agent-version-missing: live runtimes have ${input.versionsLive.join(", ")} and leave it alone)`
      : "";
  const step = (live: boolean, text: string): NextStep => ({ agent, live, runtimes, text });
  const settled = SETTLED[input.status];
  if (settled) return step(false, settled);
  if (input.status === "cancel-requested" || input.status === "pause-requested") {
    const what = input.status === "cancel-requested" ? "cancels" : "pauses";
    return owner
      ? step(true, `its owner, ${ownerText(owner)}, ${what} it before its next call (live now)`)
      : step(
          false,
          `no runtime owns it now; the next runtime with agent "${agent}" to open this journal ${what} it`,
        );
  }
  if (input.status === "waiting") {
    // A waiting run has no owner: any runtime with the agent wakes it when it is due (decision 0050).
    const waker = runtimes[0];
    return waker
      ? step(
          true,
          `the run waits; ${waker.host} pid ${waker.pid} (agent "${waker.agent}", live now) wakes it when it is due`,
        )
      : step(
          false,
          `the run waits; no runtime with agent "${agent}" is live now${missing}: when it is due, the first one to open this journal wakes it${input.hint ?? ""}`,
        );
  }
  if (owner)
    return step(true, `${ownerText(owner)} owns the run and runs it now (agent "${agent}", live now)`);
  const polling = runtimes.find((r) => r.recoversEveryMs !== null);
  if (polling) {
    const within = Math.max(1, Math.ceil((polling.recoversEveryMs ?? 0) / 1000));
    return step(
      true,
      `${polling.host} pid ${polling.pid} continues the run: it has agent "${polling.agent}", is live now, and picks the run up at its next recovery pass (every ${within} s)`,
    );
  }
  const first = runtimes[0];
  if (first) {
    return step(
      true,
      `a runtime with agent "${first.agent}" is live now (${first.host} pid ${first.pid}), but it takes runs over only when it opens this journal or calls runtime.recover(): restart it, or start \`holdfast worker --module …\` with that agent`,
    );
  }
  return step(
    false,
    `no runtime with agent "${agent}" is live now${missing}: the run continues when one opens this journal (your application on start-up, or \`holdfast worker --module …\` with that agent)${input.hint ?? ""}`,
  );
};

/**
 * The status a reader shows: `stalled — recovers when a runtime with agent X@v opens this journal`
 * for a stalled run, else its status.
 */
export const stalledText = (agent: string): string =>
  `stalled — recovers when a runtime with agent ${agent} opens this journal`;

/**
 * The status a reader shows for a run that waits for its agent's version (decision 0063):
 * `waiting — agent-version-missing: live runtimes have demo@2, not demo@1; …`.
 */
export const versionMissingText = (run: {
  readonly agent: string;
  readonly versionsLive: ReadonlyArray<string>;
}): string =>
  `waiting — agent-version-missing: live runtimes have ${run.versionsLive.join(", ")}, not ${run.agent}; it continues when a runtime with ${run.agent} opens this journal`;

/** How long ago, in words: `45 s`, `3 min`, `2 h`, `4 d`. */
export const agoText = (fromIso: string, nowMs: number): string => {
  const seconds = Math.max(0, Math.round((nowMs - Date.parse(fromIso)) / 1000));
  if (seconds < 90) return `${seconds} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  if (seconds < 36 * 3600) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
};

/**
 * One line on a stalled run: the status text, why, and since when (`owner last seen 3 min ago`).
 */
export const stalledDetail = (live: RunLiveness, nowMs: number): string => {
  const since = live.stalledSince ? agoText(live.stalledSince, nowMs) : null;
  switch (live.stalledBecause) {
    case "owner-dead":
      return `its owner ${live.owner ? ownerText(live.owner) : ""} is gone (the process no longer runs)${since ? `; last seen ${since} ago` : ""}`;
    case "lease-expired":
      return `its owner ${live.owner ? ownerText(live.owner) : ""}'s lease ran out${since ? `; last seen ${since} ago` : ""}`;
    case "no-owner":
      return `no runtime owns it${since ? ` (last event ${since} ago)` : ""}`;
    default:
      return "";
  }
};

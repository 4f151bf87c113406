import type { Claim, Fence, Journal } from "./Journal.js";

/**
 * Law 10: how much of its lease an owner must have left to start an effect — at least one second,
 * or a third of the lease. A pause (GC, swap, SIGSTOP, VM migration) shorter than this between the
 * check and the effect cannot let another worker take the run over first.
 */
export const safetyMarginMs = (leaseMs: number): number => Math.max(1_000, Math.floor(leaseMs / 3));

/** What a renewal asked for at an effect's lease check found ({@link Ownership.renewNow}). */
export type LeaseRenewal = "regained" | "kept" | "lost";

interface ClaimBatch {
  readonly runIds: string[];
  done: Promise<ReadonlyMap<string, Claim & { readonly previous: Claim | null }>>;
}

interface Owned {
  readonly epoch: number;
  /**
   * Local deadline of the lease on the monotonic clock, measured from before the claim or the last
   * renewal: a step of the wall clock neither shortens nor lengthens it (decision 0071).
   */
  deadline: number;
}

/** The clocks an owner reads: the wall clock (`Date.now`) and a monotonic one (`performance.now`). */
export interface OwnershipClock {
  /** Milliseconds since the epoch; may step (an operator, NTP, a VM resumed). */
  readonly wall: () => number;
  /** Milliseconds from an arbitrary origin; never steps. */
  readonly monotonic: () => number;
}

const systemClock: OwnershipClock = { wall: () => Date.now(), monotonic: () => performance.now() };

/**
 * How far the wall clock may move against the monotonic one between two readings before it counts
 * as a step rather than a slew (NTP slews at most 0.5 ms a second).
 */
export const CLOCK_STEP_MS = 1_000;

export interface OwnershipOptions {
  readonly journal: Journal;
  readonly workerId: string;
  readonly leaseMs: number;
  /** Whether a worker is known to be dead (its process gone); `false` when unknown. */
  readonly isWorkerDead: (workerId: string) => boolean;
  /** The clocks (tests step the wall clock); the system's by default. */
  readonly clock?: OwnershipClock;
}

/**
 * The runs this runtime owns, from claim to release (DESIGN §6: ownership lasts from claim to
 * settle). Every claimed run is renewed by the heartbeat — while recovery classifies it as much as
 * while its agent runs — and only the claims taken here are ever released.
 */
export class Ownership {
  readonly workerId: string;
  readonly leaseMs: number;
  private readonly journal: Journal;
  private readonly isWorkerDead: (workerId: string) => boolean;
  private readonly owned = new Map<string, Owned>();
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private renewing: Promise<void> | null = null;
  /** When the renewal whose answer the deadlines hold started (monotonic). */
  private renewedFrom = Number.NEGATIVE_INFINITY;
  private readonly clock: OwnershipClock;
  /** The wall clock minus the monotonic one at the last reading: a change beyond {@link CLOCK_STEP_MS} is a step. */
  private wallOffset: number;
  /** When (monotonic) the wall clock was last seen to step; leases read by the wall clock are not trusted to have expired for a lease after it. */
  private steppedAt = Number.NEGATIVE_INFINITY;

  constructor(options: OwnershipOptions) {
    this.journal = options.journal;
    this.workerId = options.workerId;
    this.leaseMs = options.leaseMs;
    this.isWorkerDead = options.isWorkerDead;
    this.clock = options.clock ?? systemClock;
    this.wallOffset = this.clock.wall() - this.clock.monotonic();
    // A quarter of the lease: a renewal late by up to half the lease still leaves the margin.
    this.heartbeat = setInterval(
      () => {
        this.watchWallClock();
        void this.renew();
      },
      Math.max(50, Math.floor(options.leaseMs / 4)),
    );
    this.heartbeat.unref?.();
  }

  /**
   * Claim a run for this worker (a take-over when its owner is known dead). Null when another live
   * worker holds it. The run is renewed from now on, until {@link release}. The claims asked for in
   * one turn of the event loop (runs admitted together) share one transaction.
   */
  async claim(runId: string): Promise<(Claim & { readonly previous: Claim | null }) | null> {
    if (!this.claiming) {
      const batch: ClaimBatch = { runIds: [], done: Promise.resolve(new Map()) };
      batch.done = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        // From here on a claim starts the next batch.
        if (this.claiming === batch) this.claiming = null;
        return this.claimMany(batch.runIds);
      });
      this.claiming = batch;
    }
    this.claiming.runIds.push(runId);
    return (await this.claiming.done).get(runId) ?? null;
  }

  /**
   * The same for several runs, in one transaction (a recovery pass). Returns the runs claimed; a run
   * missing from the map is held by another live worker.
   */
  async claimMany(
    runIds: ReadonlyArray<string>,
  ): Promise<ReadonlyMap<string, Claim & { readonly previous: Claim | null }>> {
    // A release of one of these runs still on its way lands first: it must not let go of this claim.
    await Promise.all(runIds.map((runId) => this.releases.get(runId)));
    const startedAt = this.clock.monotonic();
    // Leases in the journal end at wall-clock times: just after this process saw its wall clock
    // step, a lease that looks expired may be a live owner's that has not renewed on the new clock.
    const trustExpiry = !this.wallClockSteppedLately();
    const claims = await this.journal.claimMany(runIds, this.workerId, this.leaseMs, {
      takeOverIf: this.takeOverIf,
      ...(trustExpiry ? {} : { trustExpiry }),
    });
    for (const [runId, claim] of claims) {
      this.owned.set(runId, { epoch: claim.epoch, deadline: startedAt + this.leaseMs });
    }
    return claims;
  }

  /** A live lease found on a claim row may be taken over when its worker is known dead. */
  private readonly takeOverIf = (owner: string): boolean =>
    owner !== this.workerId && this.isWorkerDead(owner);

  /** The fence for appends of a run this worker owns. */
  fence(runId: string): Fence | undefined {
    const owned = this.owned.get(runId);
    return owned ? { runId, workerId: this.workerId, epoch: owned.epoch } : undefined;
  }

  /** Whether a claim of `workerId` belongs to another worker that may be alive. */
  heldByAnotherLiveWorker(workerId: string): boolean {
    return workerId !== this.workerId && !this.isWorkerDead(workerId);
  }

  owns(runId: string): boolean {
    return this.owned.has(runId);
  }

  /**
   * Law 10: whether this worker may start an effect of the run now — it owns the run with at least
   * the safety margin left on its lease. A run this runtime never claimed (nothing to fence) passes.
   */
  mayStartEffect(runId: string): boolean {
    const owned = this.owned.get(runId);
    if (!owned) return true;
    return this.clock.monotonic() + safetyMarginMs(this.leaseMs) < owned.deadline;
  }

  /**
   * Read both clocks; a wall clock that moved against the monotonic one by more than
   * {@link CLOCK_STEP_MS} since the last reading stepped (forward or back).
   */
  watchWallClock(): void {
    const offset = this.clock.wall() - this.clock.monotonic();
    if (Math.abs(offset - this.wallOffset) > CLOCK_STEP_MS) this.steppedAt = this.clock.monotonic();
    this.wallOffset = offset;
  }

  /** Whether the wall clock stepped within the last lease: every owner has renewed on the new clock since. */
  wallClockSteppedLately(): boolean {
    this.watchWallClock();
    return this.clock.monotonic() - this.steppedAt < this.leaseMs;
  }

  /**
   * Renew now, for an owner about to refuse an effect for want of margin (a heartbeat that waited
   * behind a long write, a pause): `regained` when the run is this worker's with the margin back,
   * `kept` when it is still this worker's (same epoch) but the renewal itself took the margin,
   * `lost` when another worker took it over, or the renewal failed and nobody can tell.
   */
  async renewNow(runId: string): Promise<LeaseRenewal> {
    if (!this.owned.has(runId)) return "lost";
    // Not behind a heartbeat's renewal that may be waiting already: this one starts now, so what it
    // finds is measured from the refusal.
    const renewed = await this.renewOnce();
    if (!renewed?.has(runId) || !this.owned.has(runId)) return "lost";
    return this.mayStartEffect(runId) ? "regained" : "kept";
  }

  /** Claims asked for in the current turn of the event loop, not yet sent. */
  private claiming: ClaimBatch | null = null;
  /** Releases asked for in the current turn of the event loop, not yet sent. */
  private releasing: { readonly runIds: string[]; readonly done: Promise<void> } | null = null;
  /** Every release asked for and not yet committed, by run: a claim of the run waits for it. */
  private readonly releases = new Map<string, Promise<void>>();

  /**
   * Let a run go (its claim row keeps the epoch); the promise resolves once the release is
   * committed. The releases asked for in one turn of the event loop (runs that finish together, a
   * recovery pass classifying several runs) share one transaction instead of a commit each.
   */
  async release(runId: string): Promise<void> {
    if (!this.owned.delete(runId)) return;
    if (!this.releasing) {
      const runIds: string[] = [];
      const done = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => {
          // From here on a release starts the next batch.
          if (this.releasing?.runIds === runIds) this.releasing = null;
          return this.journal.releaseClaims(this.workerId, runIds).catch(() => undefined);
        })
        .finally(() => {
          for (const id of runIds) if (this.releases.get(id) === done) this.releases.delete(id);
        });
      this.releasing = { runIds, done };
    }
    this.releasing.runIds.push(runId);
    this.releases.set(runId, this.releasing.done);
    await this.releasing.done;
  }

  /**
   * Forget a run whose claim was let go in the journal already, by the append that settled it
   * (`AppendRequest.releaseClaim`): no release commit. Only the claim of that epoch: a claim of the
   * run taken since is kept.
   */
  forget(runId: string, epoch: number): void {
    if (this.owned.get(runId)?.epoch === epoch) this.owned.delete(runId);
  }

  /** Stop renewing and let every claim taken here go — never another process's claim of the same id. */
  async close(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    await this.renewing;
    await this.claiming?.done.catch(() => undefined);
    await Promise.all(this.releases.values());
    const runIds = [...this.owned.keys()];
    this.owned.clear();
    if (runIds.length > 0) await this.journal.releaseClaims(this.workerId, runIds).catch(() => undefined);
  }

  private renew(): Promise<void> {
    if (this.owned.size === 0 || this.renewing) return this.renewing ?? Promise.resolve();
    this.renewing = this.renewOnce()
      .then(() => undefined)
      .finally(() => {
        this.renewing = null;
      });
    return this.renewing;
  }

  /** One renewal of every claim held here; the runs renewed, or null when the renewal failed. */
  private async renewOnce(): Promise<ReadonlySet<string> | null> {
    const startedAt = this.clock.monotonic();
    let renewed: Set<string>;
    try {
      renewed = new Set(await this.journal.renewClaims(this.workerId, this.leaseMs));
    } catch {
      // A failed renewal extends nothing; the deadlines run out on their own.
      return null;
    }
    // Two renewals may overlap (the heartbeat's and one at a lease check): only the later-started
    // one's answer counts, so an older "renewed" never undoes a newer "taken over".
    if (startedAt < this.renewedFrom) return renewed;
    this.renewedFrom = startedAt;
    for (const [runId, owned] of this.owned) {
      // A run missing from the renewal was taken over: this worker must not start its effects.
      owned.deadline = renewed.has(runId) ? startedAt + this.leaseMs : 0;
    }
    return renewed;
  }
}

import { skipped } from "../lib/metric.js";
import type { Section } from "../lib/section.js";

/*
 * Measurements not written yet. Each stays a visible "skipped" entry until it becomes one section
 * like the others (same Section shape, same metric names).
 */

/** 5. Audit: events/s verified and peak RSS on a 1,000,000-event log. */
export const auditSection: Section = {
  name: "audit",
  async run() {
    const why = "no audit section in the bench yet (runtime.audit(), issue 5, landed after it)";
    return {
      metrics: [
        skipped("audit.events_per_s", "events/s", "value >= 100000", why),
        skipped("audit.peak_rss", "MiB", "value <= 256", why),
      ],
    };
  },
};

/** 6. Subscriptions: append-to-delivery latency with a live subscriber. */
export const subscriptionsSection: Section = {
  name: "subscriptions",
  async run() {
    const why = "no subscriptions section in the bench yet (runtime.subscribe(), issue 5, landed after it)";
    return {
      metrics: [
        skipped("subscriptions.delivery.p50", "ms", null, why),
        skipped("subscriptions.delivery.p99", "ms", "value <= 5", why),
      ],
    };
  },
};

/** 7. The same measurements on PostgreSQL, when `HOLDFAST_TEST_PG_URL` reaches one. */
export const postgresSection: Section = {
  name: "postgres",
  async run() {
    const why = process.env.HOLDFAST_TEST_PG_URL
      ? "no PostgreSQL section in the bench yet (openRuntime opens PostgreSQL since issue 6 landed)"
      : "HOLDFAST_TEST_PG_URL is not set";
    return { metrics: [skipped("postgres", "", null, why)] };
  },
};

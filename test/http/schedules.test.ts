import { afterEach, describe, expect, it } from "vitest";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenServer } from "./given.js";

const tempDir = useTempDir();
let given: Given | null = null;
afterEach(async () => {
  await given?.close();
  given = null;
});

// biome-ignore lint/suspicious/noExplicitAny: replies are read as loosely as a client would read them
const body = async (response: Response) => (await response.json()) as Record<string, any>;

describe("the JSON API: schedules", () => {
  it("makes, lists, reads, pauses, resumes and deletes a schedule with the bearer token; refuses bad input saying what was wrong", async () => {
    given = await givenServer(tempDir());
    const g = given;
    const spec = {
      cron: "0 9 * * 1-5",
      timezone: "Europe/Berlin",
      agent: "pair",
      input: { a: 1 },
      by: "ada",
    };
    const made = await g.json("/api/schedules/weekday", "PUT", spec);
    expect(made.status).toBe(200);
    expect(await body(made)).toMatchObject({
      changed: true,
      schedule: { scheduleId: "weekday", cron: "0 9 * * 1-5", timezone: "Europe/Berlin", status: "active" },
    });
    expect(await body(await g.json("/api/schedules/weekday", "PUT", spec))).toMatchObject({ changed: false });

    const listed = await body(await g.request("/api/schedules"));
    expect(listed.schedules.map((s: { scheduleId: string }) => s.scheduleId)).toEqual(["weekday"]);
    expect((await body(await g.request("/api/schedules/weekday"))).nextDueAt).toMatch(/T0[78]:00:00.000Z$/);

    const paused = await body(await g.json("/api/schedules/weekday/pause", "POST", { by: "ada" }));
    expect(paused).toMatchObject({ changed: true, schedule: { status: "paused", nextDueAt: null } });
    const resumed = await body(await g.json("/api/schedules/weekday/resume", "POST", { by: "ada" }));
    expect(resumed.schedule.status).toBe("active");

    const badCron = await g.json("/api/schedules/bad", "PUT", { ...spec, cron: "0 25 * * *" });
    expect(badCron.status).toBe(422);
    expect((await body(badCron)).error.message).toMatch(/cron pattern "0 25 \* \* \*" is not valid.*hour/);
    const badZone = await g.json("/api/schedules/bad", "PUT", { ...spec, timezone: "Nowhere/City" });
    expect(badZone.status).toBe(422);
    expect((await body(badZone)).error.message).toMatch(
      /time zone "Nowhere\/City" is not an IANA time zone name/,
    );
    const missing = await g.json("/api/schedules/nope/pause", "POST", { by: "ada" });
    expect(missing.status).toBe(404);
    expect(await body(missing)).toMatchObject({ error: { code: "schedule-not-found", scheduleId: "nope" } });
    expect((await g.request("/api/schedules", { auth: "none" })).status).toBe(401);

    expect(
      (await body(await g.json("/api/schedules/weekday/delete", "POST", { by: "ada" }))).schedule.status,
    ).toBe("deleted");
    expect((await body(await g.request("/api/schedules"))).schedules).toEqual([]);
    expect((await body(await g.request("/api/schedules?all=true"))).schedules).toHaveLength(1);
  });

  it("the panel lists schedules with their next tick and pauses and resumes one only with the CSRF token", async () => {
    given = await givenServer(tempDir());
    const g = given;
    await g.runtime.schedules.upsert({ id: "often", everyMs: 60_000, agent: "pair", input: null });
    const session = await g.login("ada");
    const browse = (path: string, init: RequestInit = {}) =>
      g.request(path, {
        ...init,
        auth: "none",
        headers: {
          host: g.panelHost,
          origin: `http://${g.panelHost}`,
          cookie: session.cookie,
          "content-type": "application/x-www-form-urlencoded",
        },
      });
    const page = await (await browse("/schedules")).text();
    expect(page).toContain('data-schedule="often"');
    expect(page).toContain("every 1 min");
    const next = (await g.runtime.schedules.get("often"))!.nextDueAt!;
    expect(page).toContain(`<time datetime="${next}">`);
    expect(page).toContain('action="/schedules/often/pause"');

    const noCsrf = await browse("/schedules/often/pause", { method: "POST", body: "" });
    expect(noCsrf.status).toBe(403);
    expect((await g.runtime.schedules.get("often"))!.status).toBe("active");

    const paused = await browse("/schedules/often/pause", {
      method: "POST",
      body: `_csrf=${encodeURIComponent(session.csrf)}`,
    });
    expect(paused.status).toBe(200);
    const pausedPage = await paused.text();
    expect(pausedPage).toContain("Recorded: schedule often paused by ada.");
    expect(pausedPage).toContain('action="/schedules/often/resume"');
    expect((await g.runtime.schedules.get("often"))!.status).toBe("paused");

    const resumed = await browse("/schedules/often/resume", {
      method: "POST",
      body: `_csrf=${encodeURIComponent(session.csrf)}`,
    });
    expect(await resumed.text()).toContain("Recorded: schedule often resumed by ada.");
    expect((await g.runtime.schedules.get("often"))!.status).toBe("active");
  });
});

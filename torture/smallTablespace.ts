import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/** The tablespace the `disk-full` fault puts the private server's tables in. */
export const SMALL_TABLESPACE = "hf_small";

/**
 * The `disk-full` fault's ground (decision 0080): a size-limited tmpfs holding a tablespace of the
 * private PostgreSQL server, made the database's `default_tablespace` before the journal is
 * migrated, so every table and index of the harness's schema lives on it. {@link fill} writes a
 * ballast file until the tmpfs is full; {@link free} removes it.
 */
export interface SmallTablespace {
  /** The mount point. */
  readonly dir: string;
  /**
   * Fill the tmpfs with the ballast, then insert into a probe table on it until the server refuses
   * with 53100: the bytes of ballast, and whether the refusal came (the fault bites).
   */
  readonly fill: () => Promise<{ readonly bytes: number; readonly refused: boolean }>;
  /** Remove the ballast and empty the probe table: space is back. */
  readonly free: () => Promise<void>;
  /** Drop nothing (the server goes with the run); unmount and remove the folder. */
  readonly unmount: () => void;
}

/**
 * Write `path` until its filesystem is full (ENOSPC), in 1 MiB then 4 KiB chunks: the bytes written.
 * The `disk-full` fault's ballast in both harnesses (decision 0080).
 */
export const fillBallast = (path: string): number => {
  let bytes = 0;
  const fd = openSync(path, "w");
  try {
    for (const size of [1 << 20, 4096]) {
      const chunk = Buffer.alloc(size);
      for (;;) {
        try {
          const n = writeSync(fd, chunk);
          bytes += n;
          if (n < size) break;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === "ENOSPC") break;
          throw error;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return bytes;
};

/**
 * The libSQL harness's `disk-full` ground (decision 0080): a `sizeMib` tmpfs mounted at `dir` (made
 * here) for the trial's journal; {@link SmallDisk.fill} writes the ballast until it is full,
 * {@link SmallDisk.free} removes it. Needs root: a refused mount throws with what to do.
 */
export interface SmallDisk {
  readonly dir: string;
  readonly fill: () => number;
  readonly free: () => void;
  readonly unmount: () => void;
}

/** Mount the small disk for one trial's journal (see {@link SmallDisk}). */
export const mountSmallDisk = (dir: string, sizeMib: number): SmallDisk => {
  mkdirSync(dir, { recursive: true });
  try {
    run("mount", ["-t", "tmpfs", "-o", `size=${sizeMib}m,mode=0755`, "tmpfs", dir]);
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(
      `the disk-full fault mounts a ${sizeMib} MiB tmpfs at ${dir} and the mount was refused (${stderr || String(error)}): run the harness as root, or in a container allowed to mount`,
    );
  }
  const ballast = join(dir, "ballast");
  return {
    dir,
    fill: () => fillBallast(ballast),
    free: () => rmSync(ballast, { force: true }),
    unmount: () => {
      rmSync(ballast, { force: true });
      try {
        run("umount", ["-l", dir]);
      } catch {
        // Not mounted any more.
      }
    },
  };
};

const run = (command: string, args: ReadonlyArray<string>): void => {
  execFileSync(command, args, { stdio: ["ignore", "ignore", "pipe"] });
};

/**
 * Mount a `sizeMib` tmpfs, create the tablespace on it and make it the default of the database at
 * `url` (the private server's). Needs root, as the full-disk tests do: a refused mount throws with
 * what to do, never skips.
 */
export const mountSmallTablespace = async (url: string, sizeMib: number): Promise<SmallTablespace> => {
  const dir = mkdtempSync(join(tmpdir(), "holdfast-fault-disk-"));
  try {
    run("mount", ["-t", "tmpfs", "-o", `size=${sizeMib}m,mode=0755`, "tmpfs", dir]);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(
      `the disk-full fault mounts a ${sizeMib} MiB tmpfs at ${dir} and the mount was refused (${stderr || String(error)}): run the harness as root, or in a container allowed to mount`,
    );
  }
  const location = join(dir, "tablespace");
  mkdirSync(location);
  run("chown", ["-R", "postgres:postgres", location]);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE TABLESPACE ${SMALL_TABLESPACE} LOCATION '${location}'`);
    await client.query(`ALTER DATABASE postgres SET default_tablespace = ${SMALL_TABLESPACE}`);
    await client.query(`CREATE TABLE public.hf_disk_probe (b text) TABLESPACE ${SMALL_TABLESPACE}`);
  } finally {
    await client.end();
  }
  const ballast = join(dir, "ballast");
  return {
    dir,
    fill: async () => {
      const bytes = fillBallast(ballast);
      // The probe: a page's free space is used first, the insert that needs a new page is refused.
      const probe = new pg.Client({ connectionString: url });
      probe.on("error", () => {});
      let refused = false;
      try {
        await probe.connect();
        const row = "x".repeat(1_500);
        for (let i = 0; i < 400 && !refused; i++) {
          try {
            await probe.query("INSERT INTO public.hf_disk_probe (b) VALUES ($1)", [row]);
          } catch (error) {
            if ((error as { code?: string }).code === "53100") refused = true;
            else throw error;
          }
        }
      } finally {
        await probe.end().catch(() => {});
      }
      return { bytes, refused };
    },
    free: async () => {
      rmSync(ballast, { force: true });
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => {});
      try {
        await client.connect();
        await client.query("TRUNCATE public.hf_disk_probe");
      } finally {
        await client.end().catch(() => {});
      }
    },
    unmount: () => {
      try {
        run("umount", ["-l", dir]);
      } catch {
        // Not mounted any more.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

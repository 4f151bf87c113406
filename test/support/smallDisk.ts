import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";

/** A mounted, size-limited file system for one test: a folder on it, and the filler that fills it. */
export interface SmallDisk {
  /** The mount point: an empty folder on the small file system. */
  readonly dir: string;
  /**
   * Write a file of zeros at `name` on the disk until the disk is full (ENOSPC), keeping what fit:
   * the runaway tool, a log gone wild. Returns the bytes written.
   */
  fill(name?: string): number;
  /** Remove the filler: the space is back. */
  free(name?: string): void;
}

const run = (command: string, args: ReadonlyArray<string>): void => {
  execFileSync(command, args, { stdio: ["ignore", "ignore", "pipe"] });
};

/**
 * A size-limited tmpfs per test (`mount -t tmpfs -o size=…`), unmounted after each test. Needs root
 * (the tests run as root in CI): a refused mount fails the test loudly, it never skips it.
 */
export const useSmallDisk = (): ((sizeKib: number) => SmallDisk) => {
  const mounted: string[] = [];
  afterEach(() => {
    for (const dir of mounted.splice(0)) {
      // Lazily, so a journal still open by a leaked handle cannot keep the mount (and the test) alive.
      run("umount", ["-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
  return (sizeKib) => {
    const dir = mkdtempSync(join(tmpdir(), "holdfast-disk-"));
    try {
      run("mount", ["-t", "tmpfs", "-o", `size=${sizeKib}k,mode=0700`, "tmpfs", dir]);
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
      throw new Error(
        `the full-disk tests mount a ${sizeKib} KiB tmpfs at ${dir} and the mount was refused (${stderr || String(error)}): run the tests as root (as .ci/run does), or in a container allowed to mount`,
      );
    }
    mounted.push(dir);
    return {
      dir,
      fill(name = "filler") {
        const path = join(dir, name);
        const chunk = Buffer.alloc(4096);
        let written = 0;
        writeFileSync(path, "");
        for (;;) {
          try {
            writeFileSync(path, chunk, { flag: "a" });
            written += chunk.length;
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code === "ENOSPC") return written;
            throw error;
          }
        }
      },
      free(name = "filler") {
        rmSync(join(dir, name), { force: true });
      },
    };
  };
};

/**
 * The promise itself, marked handled: holdfast hands some promises on inside a value (a run's
 * `result`, a recovery pass's `done`) that a caller may never await, and Node ends a process on a
 * rejection nobody handled. A caller that awaits it still sees the rejection.
 */
export const handled = <T>(promise: Promise<T>): Promise<T> => {
  promise.catch(() => undefined);
  return promise;
};

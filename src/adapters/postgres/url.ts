/** Is this store string a PostgreSQL URL? */
export const isPostgresUrl = (store: string): boolean => /^postgres(ql)?:\/\//.test(store);

/** Mask the password of a URL before it is printed. */
export const maskUrl = (url: string): string => url.replace(/(\/\/[^:/@]+:)[^@]*@/, "$1****@");

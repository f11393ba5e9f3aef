/** A key-shaped secret no test should ever find written down. */
export const SECRET_KEY = 'sk-test-SECRETKEY0123456789abcdef'

/** Keeps the last `capacity` items in insertion order; capacity 0 keeps nothing. */
export class RingBuffer<T> {
  private readonly items: Array<T | undefined>;
  private next = 0;
  private size = 0;

  constructor(private readonly capacity: number) {
    this.items = new Array<T | undefined>(capacity);
  }

  push(item: T): void {
    if (this.capacity === 0) return;
    this.items[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
    if (this.size < this.capacity) this.size++;
  }

  toArray(): T[] {
    const out: T[] = [];
    const start = this.size < this.capacity ? 0 : this.next;
    for (let i = 0; i < this.size; i++) out.push(this.items[(start + i) % this.capacity] as T);
    return out;
  }

  clear(): void {
    this.items.fill(undefined);
    this.next = 0;
    this.size = 0;
  }
}

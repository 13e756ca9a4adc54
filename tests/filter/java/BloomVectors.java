import com.google.common.hash.Hashing;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

// My own reproduction of RocketMQ's BloomFilter/BitsArray/CqExtUnit rules, to print test vectors.
public class BloomVectors {
    static int[] km(int f, int n) {
        double e = f / 100.0;
        int k = (int) Math.ceil(Math.log(e) / Math.log(0.5));
        int m = (int) Math.ceil(n * (Math.log(1 / e) / Math.log(2)) * (Math.log(Math.E) / Math.log(2)));
        m = (int) (8 * Math.ceil(m / 8.0));
        return new int[]{k, m};
    }
    static int[] pos(String s, int k, int m) {
        long h = Hashing.murmur3_128().hashString(s, StandardCharsets.UTF_8).asLong();
        int h1 = (int) h, h2 = (int) (h >>> 32);
        int[] out = new int[k];
        for (int i = 1; i <= k; i++) { int c = h1 + i * h2; if (c < 0) c = ~c; out[i - 1] = c % m; }
        return out;
    }
    public static void main(String[] a) {
        int[][] fn = {{20, 32}, {10, 128}, {20, 64}, {1, 1}, {99, 1000}, {5, 7}};
        for (int[] x : fn) { int[] r = km(x[0], x[1]); System.out.println("km " + x[0] + " " + x[1] + " -> " + r[0] + " " + r[1]); }
        String[] ss = {"", "a", "G#T", "CID_SQL#TopicTest", "groupA#TopicTest", "0123456789abcdef", "0123456789abcdefXYZ",
                       "\u7ec4#\u4e3b\u9898", "%RETRY%g1#t1"};
        for (String s : ss) {
            long h = Hashing.murmur3_128().hashString(s, StandardCharsets.UTF_8).asLong();
            System.out.println("h64 [" + s + "] " + h);
            int[] p = pos(s, 3, 112);
            System.out.println("pos [" + s + "] " + java.util.Arrays.toString(p));
        }
        int[] p2 = pos("groupA#TopicTest", 4, 1088);
        System.out.println("pos k4m1088 " + java.util.Arrays.toString(p2));
        // bitmap: BitsArray of 112 bits with G#T and groupA#TopicTest hashed in (bit i -> byte i/8, mask 1<<(i%8))
        byte[] bits = new byte[14];
        for (String s : new String[]{"G#T", "groupA#TopicTest"}) for (int i : pos(s, 3, 112)) bits[i / 8] |= (byte) (1 << (i % 8));
        StringBuilder sb = new StringBuilder();
        for (byte b : bits) sb.append(String.format("%02x", b));
        System.out.println("bitmap " + sb);
        // CqExtUnit: size short, tagsCode long, msgStoreTime long, bitMapSize short, bitmap
        ByteBuffer bb = ByteBuffer.allocate(20 + 14);
        bb.putShort((short) 34); bb.putLong(-1431655766L); bb.putLong(1700000000123L); bb.putShort((short) 14); bb.put(bits);
        sb = new StringBuilder();
        for (byte b : bb.array()) sb.append(String.format("%02x", b));
        System.out.println("extunit " + sb);
        long MAX_ADDR = Integer.MIN_VALUE - 1L;
        System.out.println("MAX_ADDR " + MAX_ADDR + " MAX_REAL " + (MAX_ADDR - Long.MIN_VALUE) + " dec0 " + (0 + Long.MIN_VALUE) + " dec4096 " + (4096 + Long.MIN_VALUE));
    }
}

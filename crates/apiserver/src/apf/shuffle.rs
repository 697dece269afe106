//! Shuffle sharding (upstream `k8s.io/apiserver/pkg/util/shufflesharding`): a flow's hash
//! deals it a hand of distinct queues out of a deck, so that two flows rarely share all
//! their queues.

/// The most hash bits a deal may use.
const MAX_HASH_BITS: f64 = 60.0;
/// The largest deck upstream accepts (`1 << 26`).
const MAX_DECK_SIZE: usize = 1 << 26;

/// Deals hands of `hand_size` distinct cards out of `deck_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck_size: usize,
    hand_size: usize,
}

impl Dealer {
    /// A dealer. Errors (upstream's messages): sizes not positive, a hand larger than the
    /// deck, a deck over 2^26 cards, or more than 60 bits of hash needed
    /// (`ceil(log2(deck) * hand)`).
    pub fn new(deck_size: usize, hand_size: usize) -> Result<Dealer, String> {
        if deck_size == 0 || hand_size == 0 {
            return Err(format!(
                "deckSize {deck_size} or handSize {hand_size} is not positive"
            ));
        }
        if hand_size > deck_size {
            return Err(format!(
                "handSize {hand_size} is greater than deckSize {deck_size}"
            ));
        }
        if deck_size > MAX_DECK_SIZE {
            return Err(format!("deckSize {deck_size} is impossibly large"));
        }
        let bits = ((deck_size as f64).log2() * hand_size as f64).ceil();
        if bits > MAX_HASH_BITS {
            return Err(format!(
                "required entropy bits of deckSize {deck_size} and handSize {hand_size} is \
                 greater than {MAX_HASH_BITS}"
            ));
        }
        Ok(Dealer {
            deck_size,
            hand_size,
        })
    }

    pub fn hand_size(&self) -> usize {
        self.hand_size
    }

    /// The hand of `hash`: the hash read as mixed-radix digits (deck, deck-1, ...), each
    /// digit then shifted past the cards already dealt below it.
    pub fn deal(&self, mut hash: u64) -> Vec<usize> {
        let mut remainders = Vec::with_capacity(self.hand_size);
        for i in 0..self.hand_size {
            let radix = (self.deck_size - i) as u64;
            remainders.push((hash % radix) as usize);
            hash /= radix;
        }
        (0..self.hand_size)
            .map(|i| {
                let mut card = remainders[i];
                for j in (1..=i).rev() {
                    if card >= remainders[j - 1] {
                        card += 1;
                    }
                }
                card
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn validates_like_upstream() {
        assert!(Dealer::new(128, 6).is_ok());
        assert_eq!(
            Dealer::new(4, 5).unwrap_err(),
            "handSize 5 is greater than deckSize 4"
        );
        assert_eq!(
            Dealer::new(0, 1).unwrap_err(),
            "deckSize 0 or handSize 1 is not positive"
        );
        // 2^10 cards need 10 bits a card: 7 cards are 70 bits.
        assert!(
            Dealer::new(1024, 7)
                .unwrap_err()
                .contains("required entropy bits")
        );
    }

    #[test]
    fn hands_are_distinct_in_range_and_deterministic() {
        let dealer = Dealer::new(128, 6).unwrap();
        let mut hands = BTreeSet::new();
        for hash in [0u64, 1, 42, 0xdead_beef, u64::MAX, 1 << 59] {
            let hand = dealer.deal(hash);
            assert_eq!(hand.len(), 6);
            assert!(hand.iter().all(|&c| c < 128), "{hand:?}");
            let distinct: BTreeSet<_> = hand.iter().collect();
            assert_eq!(distinct.len(), 6, "cards repeat in {hand:?}");
            assert_eq!(hand, dealer.deal(hash));
            hands.insert(hand);
        }
        assert_eq!(hands.len(), 6, "different hashes deal different hands");
        // The hash's digits: 0 = [0, 0] -> cards 0 then 1; 5 in base (4, 3): [1, 1] -> 1, 2.
        let small = Dealer::new(4, 2).unwrap();
        assert_eq!(small.deal(0), vec![0, 1]);
        assert_eq!(small.deal(5), vec![1, 2]);
    }

    #[test]
    fn flows_spread_over_the_deck() {
        let dealer = Dealer::new(16, 2).unwrap();
        let mut seen = BTreeSet::new();
        for flow in 0..200u64 {
            let hash = crate::apf::matching::hash_flow_id("fs", &format!("user-{flow}"));
            seen.extend(dealer.deal(hash));
        }
        assert_eq!(seen.len(), 16, "every queue is in some flow's hand");
    }
}

"""The fixed few-shot preamble put before every HumanEval problem: solved functions in the
benchmark's style (signature, docstring with examples, body), about 1.5k tokens, so that the
long shared prefix lies mostly in the 2-bit tier of an oscar2 cache. Written for this project;
none of it is a HumanEval problem. ``tests/test_humaneval.py`` runs every example in it."""

PREAMBLE = '''\
from typing import Dict, List, Optional, Tuple


def cumulative_product(values: List[int]) -> List[int]:
    """ Return a list whose i-th element is the product of values[0..i].
    >>> cumulative_product([2, 3, 1, 4])
    [2, 6, 6, 24]
    >>> cumulative_product([])
    []
    """
    result = []
    product = 1
    for v in values:
        product *= v
        result.append(product)
    return result


def mask_digits(text: str) -> str:
    """ Replace every decimal digit in text by '#'.
    >>> mask_digits('card 4421, pin 07')
    'card ####, pin ##'
    >>> mask_digits('none')
    'none'
    """
    return ''.join('#' if ch.isdigit() else ch for ch in text)


def merge_sorted(a: List[int], b: List[int]) -> List[int]:
    """ Merge two lists that are each sorted in increasing order into one sorted list.
    >>> merge_sorted([1, 4, 9], [2, 3, 10, 11])
    [1, 2, 3, 4, 9, 10, 11]
    >>> merge_sorted([], [5])
    [5]
    """
    i, j = 0, 0
    out = []
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out


def invert_mapping(mapping: Dict[str, int]) -> Dict[int, List[str]]:
    """ Map each value of mapping to the sorted list of keys that have it.
    >>> invert_mapping({'a': 1, 'b': 2, 'c': 1})
    {1: ['a', 'c'], 2: ['b']}
    >>> invert_mapping({})
    {}
    """
    out: Dict[int, List[str]] = {}
    for key in sorted(mapping):
        out.setdefault(mapping[key], []).append(key)
    return out


def word_lengths(sentence: str) -> Dict[str, int]:
    """ Map each distinct word of a space-separated sentence to its length.
    >>> word_lengths('the quick brown fox')
    {'the': 3, 'quick': 5, 'brown': 5, 'fox': 3}
    >>> word_lengths('')
    {}
    """
    return {w: len(w) for w in sentence.split()}


def most_frequent(items: List[str]) -> Optional[str]:
    """ Return the item that occurs most often; among equally frequent items the one that
    occurs first. Return None for an empty list.
    >>> most_frequent(['b', 'a', 'b', 'c', 'a'])
    'b'
    >>> most_frequent([])
    """
    counts: Dict[str, int] = {}
    for it in items:
        counts[it] = counts.get(it, 0) + 1
    best = None
    for it in items:
        if best is None or counts[it] > counts[best]:
            best = it
    return best


def reverse_words(sentence: str) -> str:
    """ Return the words of a space-separated sentence in reverse order, joined by single spaces.
    >>> reverse_words('one two  three')
    'three two one'
    >>> reverse_words('')
    ''
    """
    return ' '.join(reversed(sentence.split()))


def rotate_left(items: List[int], k: int) -> List[int]:
    """ Rotate the list k places to the left; k may be larger than the list or negative.
    >>> rotate_left([1, 2, 3, 4, 5], 2)
    [3, 4, 5, 1, 2]
    >>> rotate_left([1, 2, 3], -1)
    [3, 1, 2]
    >>> rotate_left([], 3)
    []
    """
    if not items:
        return []
    k %= len(items)
    return items[k:] + items[:k]


def run_length_encode(text: str) -> List[Tuple[str, int]]:
    """ Encode text as a list of (character, count) pairs for runs of equal characters.
    >>> run_length_encode('aaabccdddd')
    [('a', 3), ('b', 1), ('c', 2), ('d', 4)]
    >>> run_length_encode('')
    []
    """
    out: List[Tuple[str, int]] = []
    for ch in text:
        if out and out[-1][0] == ch:
            out[-1] = (ch, out[-1][1] + 1)
        else:
            out.append((ch, 1))
    return out


def count_divisors(n: int) -> int:
    """ Return how many positive integers divide the positive integer n.
    >>> count_divisors(12)
    6
    >>> count_divisors(1)
    1
    >>> count_divisors(49)
    3
    """
    count = 0
    d = 1
    while d * d <= n:
        if n % d == 0:
            count += 1 if d * d == n else 2
        d += 1
    return count


def title_case(text: str) -> str:
    """ Capitalise the first letter of every word and lower-case the rest; words are separated
    by single spaces.
    >>> title_case('hello wORLD')
    'Hello World'
    >>> title_case('a')
    'A'
    """
    return ' '.join(w[:1].upper() + w[1:].lower() for w in text.split(' '))


def pairwise_differences(values: List[float]) -> List[float]:
    """ Return the differences between consecutive elements (later minus earlier).
    >>> pairwise_differences([1.0, 4.0, 9.0, 16.0])
    [3.0, 5.0, 7.0]
    >>> pairwise_differences([2.5])
    []
    """
    return [b - a for a, b in zip(values, values[1:])]


def group_by_parity(numbers: List[int]) -> Tuple[List[int], List[int]]:
    """ Split numbers into (evens, odds), each keeping the original order.
    >>> group_by_parity([5, 2, 8, 3, 1, 6])
    ([2, 8, 6], [5, 3, 1])
    """
    evens = [n for n in numbers if n % 2 == 0]
    odds = [n for n in numbers if n % 2 != 0]
    return evens, odds


def longest_common_prefix(words: List[str]) -> str:
    """ Return the longest string that every word starts with.
    >>> longest_common_prefix(['interview', 'internet', 'interval'])
    'inter'
    >>> longest_common_prefix(['abc', 'xyz'])
    ''
    >>> longest_common_prefix([])
    ''
    """
    if not words:
        return ''
    prefix = words[0]
    for w in words[1:]:
        while not w.startswith(prefix):
            prefix = prefix[:-1]
    return prefix


def chunk_list(items: List[int], size: int) -> List[List[int]]:
    """ Split items into consecutive chunks of the given size; the last may be shorter.
    >>> chunk_list([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    >>> chunk_list([], 3)
    []
    """
    return [items[i:i + size] for i in range(0, len(items), size)]


'''
